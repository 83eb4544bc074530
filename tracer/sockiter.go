//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"golang.org/x/sys/unix"
)

// sockIterTargets are the kernel's iterator targets the programs attach to,
// with the Linux version that added each.
var sockIterTargets = []struct{ fn, what, version string }{
	{"bpf_iter_tcp", "iter/tcp", "5.9"},
	{"bpf_iter_udp", "iter/udp", "5.9"},
	{"bpf_iter_task_file", "iter/task_file", "5.8"},
}

// SockIter reads every TCP and UDP socket of a network namespace with BPF
// iterators (bpf/sockiter.bpf.c), with what sock_diag does not show: how the
// port's bind bucket was made, SO_REUSEADDR/SO_REUSEPORT, SO_BINDTODEVICE,
// orphans, the timestamps of TIME_WAIT sockets, and the TCP sockets that are
// only bound. It is loaded once and read any number of times, from any
// goroutine (reads are serialized).
type SockIter struct {
	mu    sync.Mutex
	objs  sockiterObjects
	links []*link.Iter // task_file, tcp, udp: in reading order
	rbuf  []byte
}

// NewSockIter loads and attaches the socket iterators. It needs root (or
// CAP_BPF and CAP_PERFMON), a kernel with BTF, and the iterators iter/tcp,
// iter/udp (5.9) and iter/task_file (5.8); the error says which is missing.
func NewSockIter() (*SockIter, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := checkSockIterKernel(); err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock() // only kernels before 5.11 need it
	spec, err := loadSockiter()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded socket iterator object: %w", err)
	}
	s := &SockIter{}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel verifier rejected eaddr's socket iterators: %+v", ve)
		}
		return nil, fmt.Errorf("loading eaddr's socket iterators: %w", err)
	}
	for _, p := range []*ebpf.Program{s.objs.SockiterFile, s.objs.SockiterTcp, s.objs.SockiterUdp} {
		l, err := link.AttachIter(link.IterOptions{Program: p})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("attaching socket iterator %s: %w", p, err)
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// checkSockIterKernel says what the kernel lacks for the iterators: BTF, or
// one of the iterator targets (looked up in its BTF, as the loader does).
func checkSockIterKernel() error {
	if _, err := os.Stat(BTFPath); err != nil {
		return fmt.Errorf("this kernel exposes no BTF at %s (%v): the socket iterators need a kernel built with CONFIG_DEBUG_INFO_BTF=y", BTFPath, errors.Unwrap(err))
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	for _, t := range sockIterTargets {
		var fn *btf.Func
		if err := kspec.TypeByName(t.fn, &fn); err != nil {
			return fmt.Errorf("kernel %s has no BPF iterator %s (%s not in its BTF: %v): it needs Linux %s or newer with CONFIG_BPF_SYSCALL and CONFIG_PROC_FS", kernelRelease(), t.what, t.fn, err, t.version)
		}
	}
	return nil
}

// Close detaches and unloads the iterators.
func (s *SockIter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// Read returns every TCP and UDP socket of the network namespace netnsInode:
// the TCP sockets that are only bound (found in the files of every task,
// iter/task_file, one per inode), then those of its hash tables (iter/tcp,
// iter/udp: every state, TIME_WAIT and request sockets too). A socket seen
// twice (only bound, then connected or listening by the time iter/tcp
// reads it) is kept once, as first seen.
//
// The caller must be on an OS thread inside that netns (e.g. in a function
// that netns.NS.Do runs): the kernel walks the tables of the netns of the
// thread that creates the iterator. Read checks it
// (/proc/thread-self/ns/net) and fails otherwise, rather than return the
// sockets of another netns. Sockets of tasks outside eaddr's pid namespace
// are not seen by iter/task_file.
func (s *SockIter) Read(netnsInode uint64) ([]portmodel.Socket, error) {
	var socks []portmodel.Socket
	err := s.Each(netnsInode, func(sk *portmodel.Socket) { socks = append(socks, *sk) })
	if err != nil {
		return nil, err
	}
	return socks, nil
}

// maxBoundSeen bounds the inodes Each remembers of the sockets that are only
// bound, to give each once however many fds hold it, and not again from
// the hash tables: past it, such a socket may come twice (a tally counts
// its port once anyway).
const maxBoundSeen = 1 << 16

// Each is Read handing each socket to fn as it is read, nothing kept but
// the inodes of sockets that are only bound: its memory does not grow with
// the netns's sockets. fn's Socket is valid during the call only.
func (s *SockIter) Each(netnsInode uint64, fn func(*portmodel.Socket)) error {
	if s == nil { // e.g. NewSockIter failed, and its nil was passed on as an interface
		return errors.New("socket iterator: not loaded")
	}
	if netnsInode == 0 || netnsInode > math.MaxUint32 {
		return fmt.Errorf("socket iterator: netns inode %d is not a netns inode", netnsInode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.links == nil {
		return errors.New("socket iterator: closed")
	}
	runtime.LockOSThread() // nests: a caller's lock (netns.NS.Do) stays
	defer runtime.UnlockOSThread()
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return fmt.Errorf("socket iterator: stat /proc/thread-self/ns/net: %w", err)
	}
	if st.Ino != netnsInode {
		return fmt.Errorf("socket iterator: Read(net:[%d]) on a thread in net:[%d]: call it from a thread inside that netns", netnsInode, st.Ino)
	}
	if err := s.objs.TargetNetns.Set(uint32(netnsInode)); err != nil {
		return fmt.Errorf("socket iterator: setting the target netns: %w", err)
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return fmt.Errorf("socket iterator: clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	h := recHandler{netns: uint32(netnsInode), nowMS: now.Nano() / 1e6, fn: fn, seen: map[uint64]bool{}}
	for _, l := range s.links {
		if err := readIter(l, s.buf(), h.record); err != nil {
			return err
		}
	}
	return nil
}

// buf is the reading buffer, kept between reads.
func (s *SockIter) buf() []byte {
	if s.rbuf == nil {
		s.rbuf = make([]byte, 64<<10)
	}
	return s.rbuf
}

// recHandler turns the records of one Each into sockets for fn.
type recHandler struct {
	netns uint32
	nowMS int64
	fn    func(*portmodel.Socket)
	seen  map[uint64]bool // inodes of the sockets only bound, given once
}

// record is one record: a record of another netns, or of a family or
// protocol the programs never write, is an error: the filter failed, and no
// answer is better than a wrong one.
func (h *recHandler) record(r *SockRec) error {
	if r.Netns != h.netns {
		return fmt.Errorf("socket iterator: a socket of net:[%d] (%s) in the read of net:[%d]", r.Netns, fmtRec(r), h.netns)
	}
	if r.Inode != 0 && h.seen[r.Inode] {
		return nil
	}
	if r.Source == SockSrcFile && r.Inode != 0 && len(h.seen) < maxBoundSeen {
		h.seen[r.Inode] = true
	}
	sk, err := socket(r, h.nowMS)
	if err != nil {
		return err
	}
	h.fn(&sk)
	return nil
}

// readIter runs one iterator to its end, handing each record to rec as
// it is read, in buf.
func readIter(l *link.Iter, buf []byte, rec func(*SockRec) error) error {
	rc, err := l.Open()
	if err != nil {
		return fmt.Errorf("socket iterator: creating the iterator: %w", err)
	}
	defer rc.Close()
	err = readRecords(rc, buf, func(b []byte) (int, error) {
		if len(b) < SockRecSize {
			return 0, nil
		}
		return SockRecSize, rec((*SockRec)(unsafe.Pointer(&b[0])))
	})
	if err != nil {
		return fmt.Errorf("socket iterator: reading: %w", err)
	}
	return nil
}
