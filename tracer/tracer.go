//go:build linux

// Package tracer loads eaddr's BPF programs, attaches them to the exit
// tracepoints of connect(2) and bind(2), and reads their events from the ring
// buffer. It hands out the raw event as bpf2go generated it; meaning (names,
// addresses, JSON) is the decode package's business.
package tracer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"golang.org/x/sys/unix"
)

// RawEvent is the kernel's event, exactly as bpf/eaddr.h lays it out.
type RawEvent = eaddrEvent

// RawEventSize is the size of one RawEvent in the ring buffer.
const RawEventSize = int(unsafe.Sizeof(RawEvent{}))

// Syscall numbers as the kernel reports them in RawEvent.Syscall
// (bpf/eaddr.h enum syscall_id).
const (
	SysConnect = uint8(eaddrSyscallIdEADDR_SYS_CONNECT)
	SysBind    = uint8(eaddrSyscallIdEADDR_SYS_BIND)
)

// Flags in RawEvent.Flags (bpf/eaddr.h enum event_flag).
const (
	FlagAddr   = uint8(eaddrEventFlagEADDR_F_ADDR)   // Addr holds AddrCopied bytes copied from the caller
	FlagSocket = uint8(eaddrEventFlagEADDR_F_SOCKET) // Sock* and Local* were read from the fd's socket
	// FlagNodePort marks a connect() that succeeded (or is in progress) with
	// a kernel-chosen source port inside the NodePort range: not a failure.
	FlagNodePort = uint8(eaddrEventFlagEADDR_F_NODEPORT)
	// FlagLimited: LimitId is valid (the rate limit is on).
	FlagLimited = uint8(eaddrEventFlagEADDR_F_LIMITED)
	// FlagProcSent: the kernel left Exe* and Args out, as an earlier event of
	// the process carried them. Read fills them in and clears the flag; it
	// stays set only when eaddr no longer had them (Stats.ProcsForgotten).
	FlagProcSent = uint8(eaddrEventFlagEADDR_F_PROC_SENT)
	// FlagAsync: a non-blocking connect() that failed after it returned
	// EINPROGRESS; AsyncNs is how long after.
	FlagAsync = uint8(eaddrEventFlagEADDR_F_ASYNC)
	// FlagReleased: LocalAddr and LocalPort are the source address and port
	// the failed connect had, which the kernel released when it failed (a
	// blocking connect's recorded at its SYN_SENT -> CLOSE; see Ended).
	FlagReleased = uint8(eaddrEventFlagEADDR_F_RELEASED)
	// FlagInterrupted: a blocking connect() that a signal interrupted,
	// whose socket failed later (Err); AsyncNs is how long after the call.
	FlagInterrupted = uint8(eaddrEventFlagEADDR_F_INTERRUPTED)
)

// ErrnoInProgress (EINPROGRESS) is never reported, even with AllErrnos.
const ErrnoInProgress = int(eaddrErrnoIdEADDR_EINPROGRESS)

// DefaultRingSize is the ring buffer size in bytes unless Options say otherwise.
const DefaultRingSize = 4 << 20

// Options choose what the kernel reports. The zero value reports
// EADDRNOTAVAIL and EADDRINUSE, and EAGAIN from UDP sockets, from every
// process.
type Options struct {
	Errnos []int // errnos to report; empty means EADDRNOTAVAIL, EADDRINUSE and EAGAIN (UDP only)
	// UDPOnly are errnos of Errnos reported only from UDP and UDP-Lite
	// sockets (EAGAIN: a UDP socket's autobind found no free port; a unix
	// or TCP socket's EAGAIN means something else). The kernel reads the
	// socket only for these errnos.
	UDPOnly   []int
	AllErrnos bool    // every failure except EINPROGRESS
	Syscalls  []uint8 // SysConnect, SysBind: which tracepoints to attach; empty means both
	PID       uint32  // only this process (tgid); 0 for all
	NetNS     uint32  // only this network namespace inode; 0 for all
	RingSize  int     // bytes, a power of two multiple of the page size; 0 for DefaultRingSize
	// WakeupBytes: the kernel wakes the reader only once this many bytes are
	// queued; the reader must then also poll with SetDeadline. 0 wakes it
	// for every event (simplest, several us more per failing call).
	WakeupBytes int
	Logger      *slog.Logger

	// Rate, when above 0, lets at most Rate events a second (bursts of
	// max(Rate, 1)) through per cgroup, netns, syscall, errno and address;
	// the kernel counts the others and returns before touching the ring
	// (LimitCounts, LimitStates). 0: every failure is an event.
	Rate float64
	// CgroupRate, with Rate, is a second bucket per cgroup, syscall and
	// errno, whatever the address: at most CgroupRate events a second
	// (bursts of max(CgroupRate, 1)) of one cgroup pass, however many
	// addresses it fails toward (bpf/eaddr.h, struct cgroup_limit_key;
	// CgroupLimitStates). 0: no such bucket.
	CgroupRate float64

	// Async also reports non-blocking connect() calls (EINPROGRESS) whose
	// socket fails later with a wanted errno (ECONNREFUSED, ETIMEDOUT, ...):
	// each is kept, by socket, until it connects or fails (at most
	// EADDR_PENDING of bpf/eaddr.h at once, the least recently used
	// forgotten past it). Unset, the code is removed at load time and the
	// socket tracepoints are not attached.
	Async bool

	// NodePort, when set, also reports connect() calls in netns NodePort.NetNS
	// whose source port falls in [Lo, Hi]. Unset, the check is removed from
	// the program at load time and costs nothing.
	NodePort *NodePortCheck
}

// NodePortCheck configures the NodePort collision report.
type NodePortCheck struct {
	NetNS  uint32 // netns inode, normally the host's
	Lo, Hi uint16 // the Service NodePort range, 30000-32767 by default
}

// Tracer is a loaded and attached set of eaddr programs.
type Tracer struct {
	objs  eaddrObjects
	links []link.Link
	rd    *ringbuf.Reader
	rec   ringbuf.Record
	log   *slog.Logger

	procs     *procCache
	limitTick uint64 // the rate limit's clock: ns per jiffy, 0 for the fine clock (hz.go)
	// LimitStates' batch buffers.
	ncpu                  int
	limitIDs, limitPerCPU []uint64
	limitKeys             []eaddrLimitKey
	limitVals             []eaddrLimitState
	limitCPUs             []eaddrLimitCpu
	limitSums             map[uint64]uint64
	groupKeys             []CgroupLimitKey // CgroupLimitStates' batch
	groupSums             map[CgroupLimitKey]uint64

	detachOnce sync.Once
	events     uint64 // records read
	short      uint64 // records too short to be an event (never expected)
}

// ErrnoMask turns a list of errnos into the kernel's bitmap. Errnos must be 1..255.
func ErrnoMask(errnos []int) ([4]uint64, error) {
	var m [4]uint64
	for _, e := range errnos {
		if e <= 0 || e > 255 {
			return m, fmt.Errorf("errno %d is out of range 1..255", e)
		}
		m[e>>6] |= 1 << (e & 63)
	}
	return m, nil
}

// New probes the kernel, loads the programs with opts, attaches them and
// opens the ring buffer. Close releases everything.
func New(opts Options) (*Tracer, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := Probe(log); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		log.Debug("could not raise RLIMIT_MEMLOCK (only kernels before 5.11 need it)", "err", err)
	}
	spec, err := loadEaddr()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	if err := configure(spec, opts); err != nil {
		return nil, err
	}
	t := &Tracer{log: log}
	t.procs = newProcCache(procsKept, t.lookupProc)
	var jp *jiffyProbe
	if opts.Rate > 0 { // HZ is measured while the programs load (hz.go)
		if jp, err = startJiffyProbe(); err != nil {
			log.Warn("the rate limit keeps the fine clock (bpf_ktime_get_boot_ns)", "why", err)
		}
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		if jp != nil {
			jp.prog.Close()
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel verifier rejected eaddr's BPF program: %+v", ve)
		}
		return nil, fmt.Errorf("loading eaddr's BPF objects: %w", err)
	}
	if jp != nil {
		if err := t.setLimitClock(jp); err != nil {
			t.Close()
			return nil, err
		}
	}
	for _, a := range []struct {
		sys  uint8
		name string
		prog *ebpf.Program
	}{{SysConnect, "sys_exit_connect", t.objs.ExitConnect}, {SysBind, "sys_exit_bind", t.objs.ExitBind}} {
		if len(opts.Syscalls) > 0 && !slices.Contains(opts.Syscalls, a.sys) {
			continue
		}
		l, err := link.Tracepoint("syscalls", a.name, a.prog, nil)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching to tracepoint syscalls/%s: %w", a.name, err)
		}
		t.links = append(t.links, l)
	}
	if opts.Async {
		if err := t.attachAsync(); err != nil {
			t.Close()
			return nil, err
		}
	} else if endedOn(&opts) || opts.NodePort != nil {
		t.attachState(endedOn(&opts))
	}
	t.rd, err = ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	return t, nil
}

// setLimitClock gives the rate limit the jiffies clock when the probe could
// tell HZ, before the programs are attached; otherwise it keeps the fine one.
func (t *Tracer) setLimitClock(jp *jiffyProbe) error {
	tick, err := jp.tickNs()
	if err != nil {
		t.log.Warn("the rate limit keeps the fine clock (bpf_ktime_get_boot_ns): HZ not told for sure", "why", err)
		return nil
	}
	if err := t.objs.LimitTickNs.Set(tick); err != nil {
		return fmt.Errorf("setting the rate limit's clock: %w", err)
	}
	t.limitTick = tick
	t.log.Debug("the rate limit counts jiffies", "hz", time.Second/time.Duration(tick), "tick_ns", tick)
	return nil
}

func configure(spec *ebpf.CollectionSpec, opts Options) error {
	var v eaddrVariableSpecs
	var m eaddrMapSpecs
	if err := spec.Assign(&v); err != nil {
		return fmt.Errorf("BPF object does not match its Go bindings (regenerate with make generate): %w", err)
	}
	if err := spec.Assign(&m); err != nil {
		return fmt.Errorf("BPF object does not match its Go bindings (regenerate with make generate): %w", err)
	}
	var errs []error
	set := func(vs *ebpf.VariableSpec, val any) { errs = append(errs, vs.Set(val)) }
	if len(opts.Errnos) > 0 {
		mask, err := ErrnoMask(opts.Errnos)
		if err != nil {
			return err
		}
		set(v.ErrnoMask, mask)
		udp, err := ErrnoMask(opts.UDPOnly)
		if err != nil {
			return err
		}
		for _, e := range opts.UDPOnly {
			if !slices.Contains(opts.Errnos, e) {
				return fmt.Errorf("errno %d is UDP-only but not among the errnos to report", e)
			}
		}
		set(v.UdpOnlyMask, udp)
	} else if len(opts.UDPOnly) > 0 {
		return fmt.Errorf("UDP-only errnos %v without errnos to report", opts.UDPOnly)
	}
	set(v.AllErrnos, opts.AllErrnos)
	set(v.AsyncOn, opts.Async)
	set(v.EndedOn, endedOn(&opts))
	if !opts.Async {
		m.Pending.MaxEntries = 1 // preallocated (LRU): no memory for what is off
	}
	if !endedOn(&opts) {
		m.ConnEnds.MaxEntries = 1
	}
	set(v.FilterTgid, opts.PID)
	set(v.FilterNetns, opts.NetNS)
	if np := opts.NodePort; np != nil {
		if np.Lo > np.Hi || np.NetNS == 0 {
			return fmt.Errorf("NodePort check: range %d-%d or netns %d is not valid", np.Lo, np.Hi, np.NetNS)
		}
		set(v.NodeportOn, true)
		set(v.NodeportNetns, np.NetNS)
		set(v.NodeportLo, np.Lo)
		set(v.NodeportHi, np.Hi)
	}
	if opts.WakeupBytes < 0 {
		return fmt.Errorf("wakeup threshold %d is negative", opts.WakeupBytes)
	}
	set(v.WakeupBytes, uint64(opts.WakeupBytes))
	if err := configureRates(&v, &m, &opts, set); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("setting the BPF program's options: %w", err)
	}
	size := opts.RingSize
	if size == 0 {
		size = DefaultRingSize
	}
	page := os.Getpagesize()
	if size < page || size&(size-1) != 0 {
		return fmt.Errorf("ring buffer size %d is not a power of two of at least the page size (%d)", size, page)
	}
	m.Events.MaxEntries = uint32(size)
	return nil
}

// AsyncErrnos are the errnos a non-blocking connect() can fail with after
// it returned EINPROGRESS: refused, timed out, unreachable.
var AsyncErrnos = []int{int(unix.ECONNREFUSED), int(unix.ETIMEDOUT), int(unix.EHOSTUNREACH), int(unix.ENETUNREACH)}

// WantsAsync reports whether opts ask for an errno that a pending connect
// can fail with, and trace connect().
func WantsAsync(opts *Options) bool {
	if len(opts.Syscalls) > 0 && !slices.Contains(opts.Syscalls, SysConnect) {
		return false
	}
	if opts.AllErrnos {
		return true
	}
	for _, e := range opts.Errnos {
		if slices.Contains(AsyncErrnos, e) {
			return true
		}
	}
	return false
}

// attachAsync attaches the programs that see a pending connect's outcome:
// BTF tracepoints (tp_btf) on sock:inet_sk_error_report and
// sock:inet_sock_set_state, and for a pending connect whose end neither of
// them saw, the exit of getsockopt() (the error its program read with
// SO_ERROR) and tcp:tcp_destroy_sock (the error still held, or counted:
// Stats.AsyncUnseen).
func (t *Tracer) attachAsync() error {
	l, err := link.Tracepoint("syscalls", "sys_exit_getsockopt", t.objs.ExitGetsockopt, nil)
	if err != nil {
		return fmt.Errorf("attaching to tracepoint syscalls:sys_exit_getsockopt (asynchronous connect failures): %w", err)
	}
	t.links = append(t.links, l)
	for _, a := range []struct {
		name string
		prog *ebpf.Program
	}{{"sock:inet_sk_error_report", t.objs.AsyncError}, {"sock:inet_sock_set_state", t.objs.AsyncState},
		{"tcp:tcp_destroy_sock", t.objs.AsyncDestroy}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog})
		if err != nil {
			return fmt.Errorf("attaching to tracepoint %s (asynchronous connect failures; this kernel may lack it, so leave ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH and ENETUNREACH out of --errno): %w", a.name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// endedOn: record how failing TCP connects end (their released source
// address and port, bpf/eaddr.h struct conn_end), as some socket error a
// connect can fail with is wanted.
func endedOn(opts *Options) bool { return WantsAsync(opts) }

// attachState attaches sock:inet_sock_set_state without the asynchronous
// report: it makes the socket cookies of connects (Options.NodePort links
// a collision to its failure with them) and records the source port of
// failing ones; with ended, also sock:inet_sk_error_report, which records
// that port again when the kernel skipped async_state's run (bpf
// async_error). Without them events lack both, and say nothing wrong: the
// failure is logged, not fatal.
func (t *Tracer) attachState(ended bool) {
	progs := []*ebpf.Program{t.objs.AsyncState}
	if ended {
		progs = append(progs, t.objs.AsyncError)
	}
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			t.log.Warn("attaching to a sock tracepoint failed: failed connects may show local 0.0.0.0:0 and events no socket cookie", "program", p.String(), "err", err)
			continue
		}
		t.links = append(t.links, l)
	}
}

// gcra turns rate events per second, bursts of max(rate, 1), into the
// kernel's emission interval and tolerance.
func gcra(rate float64) (interval, tolerance uint64) {
	iv := max(float64(time.Second)/rate, 1)
	burst := max(rate, 1)
	return uint64(iv), uint64((burst - 1) * iv)
}

// Read blocks until an event arrives and copies it into ev. It returns
// os.ErrDeadlineExceeded when the deadline set with SetDeadline passes with no
// event, and ErrClosed once Close was called or after Stop has drained the ring.
func (t *Tracer) Read(ev *RawEvent) error {
	for {
		err := t.rd.ReadInto(&t.rec)
		switch {
		case err == nil:
		case errors.Is(err, ringbuf.ErrClosed), errors.Is(err, ringbuf.ErrFlushed):
			return ErrClosed
		default:
			return err
		}
		if err := ev.UnmarshalBinary(t.rec.RawSample); err != nil {
			t.short++
			t.log.Error("dropping a malformed ring buffer record", "err", err)
			continue
		}
		t.events++
		t.procs.fill(ev)
		return nil
	}
}

// Pending is the number of bytes waiting in the ring buffer: 0 means a
// Read now would block.
func (t *Tracer) Pending() int { return t.rd.AvailableBytes() }

// ErrClosed is returned by Read when the tracer is stopped and drained.
var ErrClosed = errors.New("tracer closed")

// SetDeadline makes a blocked Read return os.ErrDeadlineExceeded at d.
// The zero time means no deadline.
func (t *Tracer) SetDeadline(d time.Time) { t.rd.SetDeadline(d) }

// Stop detaches the programs, so no new event is produced, and wakes the
// reader: Read returns what is still queued, then ErrClosed. Safe to call from
// another goroutine and more than once.
func (t *Tracer) Stop() {
	t.detachOnce.Do(func() {
		for _, l := range t.links {
			if err := l.Close(); err != nil {
				t.log.Warn("detaching", "err", err)
			}
		}
		t.links = nil
		if t.rd != nil {
			if err := t.rd.Flush(); err != nil {
				t.log.Warn("waking the ring buffer reader", "err", err)
			}
		}
	})
}

// StopOnDone calls Stop when ctx is done.
func (t *Tracer) StopOnDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, t.Stop)
}

// Stats are the tracer's counters.
type Stats struct {
	Events     uint64 // events read from the ring buffer
	KernelLost uint64 // events the kernel dropped because the ring buffer was full
	Malformed  uint64 // records that were not an event (never expected)
	// Events whose program identity the kernel had sent with an earlier
	// event of the process, and which neither eaddr (the last 4,096 to
	// 8,192 processes) nor the kernel's map (the last 8,192) still had.
	ProcsForgotten  uint64
	Procs, ProcsMax int // processes whose program identity is kept, and the bound
	// RunsSkipped, by program (Programs), are the runs the kernel did not
	// make because the program was already running on that CPU (for the
	// syscall programs: any kprobe or tracepoint program was; its recursion
	// check, bpf_prog_info.recursion_misses): a skipped run of an exit may
	// have been a failure; what a skipped async_state records, async_error
	// records again. The kernel counts them for the sock: tracepoints on
	// every kernel eaddr loads on (6.1's __bpf_trace_run does); 6.1 skips
	// the syscall ones uncounted (trace_call_bpf), 6.12 counts them.
	RunsSkipped [len(Programs)]uint64
	// AsyncUnseen are pending connects (--async) whose socket was destroyed
	// before either async program saw the connect end, with its error
	// already read by its program other than with SO_ERROR (recv, send): a
	// failure whose errno and event are lost. The kernel did not run the
	// programs at all (no skipped run was counted): this VM's kernel does
	// not run BPF programs in a softirq over its agent's threads
	// (docs/testing.md).
	AsyncUnseen uint64
}

// Programs names eaddr's BPF programs, in the order of Stats.RunsSkipped.
var Programs = [...]string{"exit_connect", "exit_bind", "async_error", "async_state", "async_destroy", "exit_getsockopt"}

// programs are eaddr's programs in the order of Programs.
func (t *Tracer) programs() [len(Programs)]*ebpf.Program {
	return [...]*ebpf.Program{t.objs.ExitConnect, t.objs.ExitBind, t.objs.AsyncError, t.objs.AsyncState, t.objs.AsyncDestroy, t.objs.ExitGetsockopt}
}

// RunsSkippedTotal sums RunsSkipped.
func (s Stats) RunsSkippedTotal() (n uint64) {
	for _, v := range s.RunsSkipped {
		n += v
	}
	return n
}

// Stats reads the counters; KernelLost and AsyncUnseen sum per-CPU
// counters, and RunsSkipped is the kernel's count for each program (a
// syscall each).
func (t *Tracer) Stats() (Stats, error) {
	s := Stats{Events: t.events, Malformed: t.short, ProcsForgotten: t.procs.forgotten, Procs: t.procs.len(), ProcsMax: 2 * t.procs.max}
	for _, c := range []struct {
		slot eaddrLostSlot
		n    *uint64
	}{{eaddrLostSlotEADDR_LOST_RING, &s.KernelLost}, {eaddrLostSlotEADDR_LOST_UNSEEN, &s.AsyncUnseen}} {
		var per []uint64
		if err := t.objs.Lost.Lookup(uint32(c.slot), &per); err != nil {
			return s, fmt.Errorf("reading the lost-events counters: %w", err)
		}
		for _, n := range per {
			*c.n += n
		}
	}
	for i, p := range t.programs() {
		ps, err := p.Stats()
		if err != nil {
			return s, fmt.Errorf("reading program %s's counters: %w", Programs[i], err)
		}
		s.RunsSkipped[i] = ps.RecursionMisses
	}
	return s, nil
}

// LimitCounts sums the rate limit's per-CPU counters: failures held back in
// the kernel, and keys created (more than LimitKeysMax() in the map means the
// oldest were evicted).
func (t *Tracer) LimitCounts() (suppressed, keys uint64, err error) {
	if err := t.objs.LimitCpus.Lookup(uint32(0), &t.limitCPUs); err != nil {
		return 0, 0, fmt.Errorf("reading the rate limit's counters: %w", err)
	}
	for _, c := range t.limitCPUs {
		suppressed += c.Suppressed
		keys += c.Keys
	}
	return suppressed, keys, nil
}

// LimitKeysMax is how many rate limit keys the kernel keeps (LRU).
func (t *Tracer) LimitKeysMax() int { return int(t.objs.Limits.MaxEntries()) }

// limitBatch is the batch size of the rate limit maps' reads.
const limitBatch = 256

// LimitStates calls fn with the id of each rate limit key that held back
// failures and how many, summed over CPUs, since the key was created; it
// returns how many keys the kernel keeps now (for evictions, see
// LimitCounts). A count read while a CPU moves it from its slot to
// limit_counts may come out short, never long: the map is read before the
// slots. Once a second: batched reads of the maps, no allocation once warm.
func (t *Tracer) LimitStates(fn func(id, suppressed uint64)) (keys int, err error) {
	if err := t.warmLimitBuffers(); err != nil {
		return 0, err
	}
	err = sumCounts(t, t.objs.LimitCounts, t.limitIDs, t.limitSums, func(c *eaddrLimitCpu) (uint64, uint64) { return c.Id, c.Held })
	if err != nil {
		return 0, fmt.Errorf("reading the rate limit's counts: %w", err)
	}
	for id, n := range t.limitSums {
		fn(id, n)
	}
	err = batches(t.objs.Limits, t.limitKeys, t.limitVals, func(n int) { keys += n })
	if err != nil {
		return 0, fmt.Errorf("reading the rate limit's keys: %w", err)
	}
	return keys, nil
}

// sumCounts reads counts, a per-CPU map of key -> failures held back, into
// sums (cleared first), summed over CPUs, through the batch buffer keys;
// then the CPUs' slots (limit_cpus), in which held finds a key and what
// the slot holds for it and has not moved to counts yet (a zero key:
// none).
func sumCounts[K comparable](t *Tracer, counts *ebpf.Map, keys []K, sums map[K]uint64, held func(*eaddrLimitCpu) (K, uint64)) error {
	clear(sums)
	err := batches(counts, keys, t.limitPerCPU, func(n int) {
		for i, k := range keys[:n] {
			for _, c := range t.limitPerCPU[i*t.ncpu : (i+1)*t.ncpu] {
				sums[k] += c
			}
		}
	})
	if err != nil {
		return err
	}
	if err := t.objs.LimitCpus.Lookup(uint32(0), &t.limitCPUs); err != nil {
		return fmt.Errorf("the per-CPU slots: %w", err)
	}
	var none K
	for i := range t.limitCPUs {
		if k, n := held(&t.limitCPUs[i]); k != none && n != 0 {
			sums[k] += n
		}
	}
	return nil
}

// warmLimitBuffers makes the rate limit reads' buffers, once.
func (t *Tracer) warmLimitBuffers() error {
	if t.limitIDs != nil {
		return nil
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	t.ncpu = ncpu
	t.limitIDs, t.limitPerCPU = make([]uint64, limitBatch), make([]uint64, limitBatch*t.ncpu)
	t.limitKeys, t.limitVals = make([]eaddrLimitKey, limitBatch), make([]eaddrLimitState, limitBatch)
	t.limitSums = make(map[uint64]uint64)
	t.groupKeys, t.groupSums = make([]CgroupLimitKey, limitBatch), make(map[CgroupLimitKey]uint64)
	return nil
}

// batches reads all of m, len(keys) entries at a time, calling got after each.
func batches(m *ebpf.Map, keys, vals any, got func(n int)) error {
	var cur ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cur, keys, vals, nil)
		got(n)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Close detaches the programs and frees every kernel object.
func (t *Tracer) Close() error {
	t.Stop()
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// CgroupPath is a cgroup's path as the kernel recorded it the first time a
// task in that cgroup failed (bpf/eaddr.h struct cgroup_path): Names[0] is
// the leaf, Names[Depth-1] the child of the root.
type CgroupPath = eaddrCgroupPath

// CgroupPathMax is the longest path a CgroupPath holds, slashes included.
const CgroupPathMax = int(unsafe.Sizeof(CgroupPath{}.Names))

// CgroupFlag is the type of CgroupPath.Flags.
type CgroupFlag = eaddrCgroupFlag

// Flags in CgroupPath.Flags: when either is set the names are not the whole path.
const (
	CgroupDeep = eaddrCgroupFlagEADDR_CG_DEEP // deeper than the names kept: the ones nearest the root are missing
	CgroupLong = eaddrCgroupFlagEADDR_CG_LONG // a name was cut
)

// LookupCgroup copies the recorded path of cgroup id into p; false when the
// kernel has none (no failure seen from it yet, or evicted: the map is an LRU
// of the most recent cgroups). It works after the cgroup was removed.
func (t *Tracer) LookupCgroup(id uint64, p *CgroupPath) (bool, error) {
	err := t.objs.CgroupPaths.Lookup(&id, p)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return false, nil
	}
	return err == nil, err
}

// UnmarshalBinary copies a ring buffer record into ev without allocating.
func (ev *RawEvent) UnmarshalBinary(b []byte) error {
	if len(b) < RawEventSize {
		return fmt.Errorf("record of %d bytes is shorter than an event (%d bytes)", len(b), RawEventSize)
	}
	*ev = *(*RawEvent)(unsafe.Pointer(&b[0]))
	return nil
}
