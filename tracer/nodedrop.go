//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
)

// NodeDropRecord is one packet the node threw away that opened a new flow,
// exactly as bpf/nodedrop.h lays it out.
type NodeDropRecord = nodedropNodeDrop

// Flags in NodeDropRecord.Flags (bpf/nodedrop.h enum node_drop_flag).
const (
	DropFlagCT        = uint8(nodedropNodeDropFlagNODEDROP_F_CT)        // Ct*, Rp* and CtStatus are the skb's conntrack entry's
	DropFlagConfirmed = uint8(nodedropNodeDropFlagNODEDROP_F_CONFIRMED) // the entry was in the table already
	DropFlagSrcNAT    = uint8(nodedropNodeDropFlagNODEDROP_F_SRC_NAT)   // its source NAT was done: Rp* has the node's address and port
	DropFlagHeader    = uint8(nodedropNodeDropFlagNODEDROP_F_HEADER)    // Hdr* were read from the IP header
	DropFlagSocket    = uint8(nodedropNodeDropFlagNODEDROP_F_SOCKET)    // the netns is the skb's socket's: a packet of this host, before a device
)

// DefaultDropReasons are the drop reasons (enum skb_drop_reason, less its
// SKB_DROP_REASON_ prefix) that mean the node threw away a packet on its
// way through: netfilter (conntrack refused or could not make the entry,
// a rule), the reverse path filter, a tc program, a full queue, a next hop
// that never answered, an IPsec policy. Those a kernel lacks are left out.
var DefaultDropReasons = []string{"NETFILTER_DROP", "IP_RPFILTER", "TC_INGRESS", "TC_EGRESS", "TC_DROP",
	"QDISC_DROP", "NEIGH_FAILED", "NEIGH_QUEUEFULL", "XFRM_POLICY"}

// NodeDropOptions choose what NewNodeDrops watches.
type NodeDropOptions struct {
	Reasons []string // reason names without the SKB_DROP_REASON_ prefix; empty: DefaultDropReasons
	// Rate is how many drops a second each CPU sends (bursts of max(Rate,
	// 1)); the others are counted (NodeDropCounts.Held). 0: no limit.
	Rate     float64
	RingSize int // bytes, a power of two multiple of the page size; 0: 256 KiB
}

// NodeDrops is the loaded and attached program of bpf/nodedrop.bpf.c and
// its ring reader. Read from one goroutine; Counts and ReasonName from any.
type NodeDrops struct {
	drained  atomic.Int64 // Drained, in Unix ns; 0: not yet
	objs     nodedropObjects
	link     link.Link
	rd       *ringbuf.Reader
	rec      ringbuf.Record
	reasons  map[uint32]string // this kernel's numbers of enum skb_drop_reason
	watched  []string          // the reasons watched, as found
	once     sync.Once
	deadline time.Time // Read's, from SetDeadline
	cpus     []nodedropDropCpu
	mu       sync.Mutex // cpus
}

// DropReasons reads enum skb_drop_reason from the kernel's BTF: number ->
// name without the SKB_DROP_REASON_ prefix. Its numbers change between
// kernels (reasons are added in the middle): never hard-code one.
func DropReasons() (map[uint32]string, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		return nil, fmt.Errorf("the kernel's BTF has no enum skb_drop_reason (Linux 5.17 added it): %w", err)
	}
	out := make(map[uint32]string, len(e.Values))
	for _, v := range e.Values {
		out[uint32(v.Value)] = strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
	}
	return out, nil
}

// NewNodeDrops loads bpf/nodedrop.bpf.c with opts and attaches it to the
// BTF tracepoint skb:kfree_skb.
func NewNodeDrops(opts NodeDropOptions) (*NodeDrops, error) {
	reasons, err := DropReasons()
	if err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock() // only kernels before 5.11 need it
	spec, err := loadNodedrop()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded node drop object: %w", err)
	}
	n := &NodeDrops{reasons: reasons}
	if err := n.configure(spec, opts); err != nil {
		return nil, err
	}
	if err := spec.LoadAndAssign(&n.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel verifier rejected eaddr's node drop program: %+v", ve)
		}
		return nil, fmt.Errorf("loading eaddr's node drop program: %w", err)
	}
	if n.link, err = link.AttachTracing(link.TracingOptions{Program: n.objs.KfreeSkbNewFlow}); err != nil {
		n.objs.Close()
		return nil, fmt.Errorf("attaching to tracepoint skb:kfree_skb (tp_btf): %w", err)
	}
	if n.rd, err = ringbuf.NewReader(n.objs.Drops); err != nil {
		n.Close()
		return nil, fmt.Errorf("opening the node drop ring: %w", err)
	}
	return n, nil
}

func (n *NodeDrops) configure(spec *ebpf.CollectionSpec, opts NodeDropOptions) error {
	var v nodedropVariableSpecs
	var m nodedropMapSpecs
	if err := errors.Join(spec.Assign(&v), spec.Assign(&m)); err != nil {
		return fmt.Errorf("node drop object does not match its Go bindings (regenerate with make generate): %w", err)
	}
	names := opts.Reasons
	if len(names) == 0 {
		names = DefaultDropReasons
	}
	byName := make(map[string]uint32, len(n.reasons))
	for num, name := range n.reasons {
		byName[name] = num
	}
	var mask [4]uint64
	for _, name := range names {
		num, ok := byName[name]
		if !ok {
			if len(opts.Reasons) > 0 {
				return fmt.Errorf("this kernel has no drop reason %s", name)
			}
			continue
		}
		if num >= 256 {
			return fmt.Errorf("drop reason %s is %d on this kernel, past the 256 the program watches", name, num)
		}
		mask[num>>6] |= 1 << (num & 63)
		n.watched = append(n.watched, name)
	}
	if len(n.watched) == 0 {
		return fmt.Errorf("this kernel has none of the drop reasons %v", names)
	}
	var errs []error
	errs = append(errs, v.ReasonMask.Set(mask))
	if opts.Rate > 0 {
		iv, tol := gcra(opts.Rate)
		errs = append(errs, v.DropIntervalNs.Set(iv), v.DropToleranceNs.Set(tol))
	}
	if opts.RingSize > 0 {
		m.Drops.MaxEntries = uint32(opts.RingSize)
	}
	errs = append(errs, v.DropWakeupBytes.Set(uint64(m.Drops.MaxEntries/8))) // Read polls too
	return errors.Join(errs...)
}

// Watched are the drop reasons the program watches on this kernel.
func (n *NodeDrops) Watched() []string { return n.watched }

// ReasonName is reason's name on this kernel ("NETFILTER_DROP"), or
// "unknown:N".
func (n *NodeDrops) ReasonName(reason uint32) string {
	if s, ok := n.reasons[reason]; ok {
		return s
	}
	return fmt.Sprintf("unknown:%d", reason)
}

// dropPoll is how often Read looks at the ring: the kernel wakes it only
// once an eighth of the ring is full (drop_wakeup_bytes).
const dropPoll = 50 * time.Millisecond

// Read blocks until a drop arrives and copies it into d; os.ErrDeadlineExceeded
// after SetDeadline's time, ErrClosed once closed and drained.
func (n *NodeDrops) Read(d *NodeDropRecord) error {
	for {
		poll := time.Now().Add(dropPoll)
		if !n.deadline.IsZero() && n.deadline.Before(poll) {
			poll = n.deadline
		}
		n.rd.SetDeadline(poll)
		start := time.Now()
		err := n.rd.ReadInto(&n.rec)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The reader returns this only once it found the ring empty
			// after its wait: every record committed before start is read,
			// and the caller handled what earlier Reads returned.
			n.drained.Store(start.UnixNano())
			if !n.deadline.IsZero() && !time.Now().Before(n.deadline) {
				return err
			}
			continue
		case errors.Is(err, ringbuf.ErrClosed), errors.Is(err, ringbuf.ErrFlushed):
			return ErrClosed
		default:
			return err
		}
		if len(n.rec.RawSample) < int(unsafe.Sizeof(*d)) {
			continue // never expected: the program writes whole records
		}
		*d = *(*NodeDropRecord)(unsafe.Pointer(&n.rec.RawSample[0]))
		return nil
	}
}

// Drained is the latest time by which every drop recorded before it was
// returned by Read and handled by its caller (who called Read again); the
// zero time until the first. It moves at least every poll (50 ms) while
// the ring is not flooded. Safe from any goroutine.
func (n *NodeDrops) Drained() time.Time {
	if ns := n.drained.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// SetDeadline makes a blocked Read return os.ErrDeadlineExceeded at t
// (the zero time: no deadline). Call it from Read's goroutine.
func (n *NodeDrops) SetDeadline(t time.Time) { n.deadline = t }

// NodeDropCounts are the program's per-CPU counters, summed.
type NodeDropCounts struct {
	Seen uint64 // first packets of new flows dropped for a watched reason
	Held uint64 // of those, held back by the per-CPU rate limit
	Lost uint64 // of those, lost: the ring was full
}

// Counts sums the per-CPU counters.
func (n *NodeDrops) Counts() (NodeDropCounts, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var c NodeDropCounts
	if err := n.objs.DropCpus.Lookup(uint32(0), &n.cpus); err != nil {
		return c, fmt.Errorf("reading the node drop counters: %w", err)
	}
	for _, p := range n.cpus {
		c.Seen += p.Seen
		c.Held += p.Held
		c.Lost += p.Lost
	}
	return c, nil
}

// Program is the loaded program (for its run statistics).
func (n *NodeDrops) Program() *ebpf.Program { return n.objs.KfreeSkbNewFlow }

// Stop detaches the program and wakes the reader: Read returns what is
// queued, then ErrClosed.
func (n *NodeDrops) Stop() {
	n.once.Do(func() {
		if n.link != nil {
			n.link.Close()
		}
		if n.rd != nil {
			n.rd.Flush()
		}
	})
}

// Close detaches the program and frees its objects.
func (n *NodeDrops) Close() error {
	n.Stop()
	var errs []error
	if n.rd != nil {
		errs = append(errs, n.rd.Close())
	}
	return errors.Join(append(errs, n.objs.Close())...)
}
