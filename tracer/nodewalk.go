//go:build linux

package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// nodeWalkTargets are the kernel's iterator targets and helpers the node
// walk needs, with the Linux version that added each.
var nodeWalkTargets = []struct{ fn, what, version string }{
	{"bpf_iter_task", "iter/task", "5.8"},
	{"bpf_iter_task_file", "iter/task_file", "5.8"},
	{"bpf_loop", "the bpf_loop helper", "5.17"},
}

// NodeWalk reads every TCP socket of every network namespace of the node in
// one pass (bpf/nodewalk.bpf.c), with each process's netns and each
// netns's port settings: what the port sampler needs, at the cost of one
// walk of the node's sockets rather than one per netns. It is loaded once
// and walked any number of times, from any goroutine (walks are
// serialized).
type NodeWalk struct {
	mu    sync.Mutex
	objs  nodewalkObjects
	links []*link.Iter // tasks, files, hash: in reading order
	gen   uint64
	buf   []byte
	// recs bounds the records a chunk buffers (0: NODEWALK_CHUNK_RECS);
	// tests make it small.
	recs uint32
}

// chunkBuckets is the buckets of the hash tables a task object of the hash
// walk reads. A client's connections toward one destination sit in
// neighbouring buckets (inet_ehashfn adds the local port to the hash), so
// a chunk holds at most about one socket a bucket of each such run, far
// below the NODEWALK_CHUNK_RECS it can hold; a chunk that still fills (or
// meets a chain it cannot read) stops, and its other buckets are read
// again one by one.
const chunkBuckets = 64

// maxLeft bounds the bucket ranges a walk reads again one by one; past
// it they are counted as cut.
const maxLeft = 1 << 12

// NodeVisitor gets what a walk reads as it reads it, in this order: every
// process and its netns with each netns's settings (before any socket of
// it), the TCP sockets that are only bound, the listening sockets, the
// established hash (with TIME_WAIT and request sockets). Nothing of a walk
// is kept: what the visitor does not keep is gone.
type NodeVisitor interface {
	// Member: a process of eaddr's pid namespace, and its netns.
	Member(netns uint32, pid int, kthread bool)
	// NetNS: a netns's port settings, once per walk.
	NetNS(s *NetNSSettings)
	// Socket: one record; r is valid during the call only. A socket that
	// is only bound comes once per fd that holds it.
	Socket(r *SockRec)
	// Cut: buckets of the hash tables the walk left unread (their chains
	// kept changing under it, or a chunk's buffer was full), and sockets
	// it could not read.
	Cut(n int)
}

// NetNSSettings are a netns's port settings, read from its struct net.
type NetNSSettings struct {
	NetNS             uint32
	PortLo, PortHi    int              // net.ipv4.ip_local_port_range
	Reserved          []portmodel.Span // net.ipv4.ip_local_reserved_ports
	UnprivilegedStart int              // net.ipv4.ip_unprivileged_port_start
	TWReuse           int              // net.ipv4.tcp_tw_reuse
	TWReuseDelayMS    int              // net.ipv4.tcp_tw_reuse_delay; -1 where the kernel has none
	// OwnHash: its TCP sockets are in hash tables of its own
	// (net.ipv4.tcp_child_ehash_entries), which the walk does not read.
	OwnHash bool
}

// NewNodeWalk loads and attaches the node walk. It needs root (or CAP_BPF
// and CAP_PERFMON), a kernel with BTF, the iterators iter/task,
// iter/task_file and the bpf_loop helper (5.17); the error says which is
// missing.
func NewNodeWalk() (*NodeWalk, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := checkNodeWalkKernel(); err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock()
	spec, err := loadNodewalk()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded node walk object: %w", err)
	}
	w := &NodeWalk{buf: make([]byte, 64<<10)}
	if err := spec.LoadAndAssign(&w.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel verifier rejected eaddr's node walk: %+v", ve)
		}
		return nil, fmt.Errorf("loading eaddr's node walk: %w", err)
	}
	for _, p := range []*ebpf.Program{w.objs.NodewalkTasks, w.objs.NodewalkFiles, w.objs.NodewalkHash} {
		l, err := link.AttachIter(link.IterOptions{Program: p})
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("attaching node walk iterator %s: %w", p, err)
		}
		w.links = append(w.links, l)
	}
	return w, nil
}

// checkNodeWalkKernel says what the kernel lacks for the walk.
func checkNodeWalkKernel() error {
	if _, err := os.Stat(BTFPath); err != nil {
		return fmt.Errorf("this kernel exposes no BTF at %s (%v): the node walk needs a kernel built with CONFIG_DEBUG_INFO_BTF=y", BTFPath, errors.Unwrap(err))
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	for _, t := range nodeWalkTargets {
		var fn *btf.Func
		if err := kspec.TypeByName(t.fn, &fn); err != nil {
			return fmt.Errorf("kernel %s lacks %s (%s not in its BTF: %v): the node walk needs Linux %s or newer", kernelRelease(), t.what, t.fn, err, t.version)
		}
	}
	return nil
}

// Close detaches and unloads the walk.
func (w *NodeWalk) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, l := range w.links {
		errs = append(errs, l.Close())
	}
	w.links = nil
	errs = append(errs, w.objs.Close())
	return errors.Join(errs...)
}

// Walk reads the node once and hands each record to v as it is read.
// With lean, the sockets' inodes and uids are left out (zero): four probe
// reads of each socket that the port sampler does not need.
func (w *NodeWalk) Walk(v NodeVisitor, lean bool) error {
	if w == nil {
		return errors.New("node walk: not loaded")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.links == nil {
		return errors.New("node walk: closed")
	}
	w.gen++
	if err := w.objs.WalkGen.Set(w.gen); err != nil {
		return fmt.Errorf("node walk: setting the walk's number: %w", err)
	}
	if err := w.objs.Lean.Set(lean); err != nil {
		return fmt.Errorf("node walk: setting lean: %w", err)
	}
	if err := w.read(w.links[0], taskRecord(v)); err != nil {
		return fmt.Errorf("node walk: tasks: %w", err)
	}
	if err := w.read(w.links[1], sockRecord(v)); err != nil {
		return fmt.Errorf("node walk: files: %w", err)
	}
	if err := w.walkHash(v); err != nil {
		return fmt.Errorf("node walk: hash tables: %w", err)
	}
	return nil
}

// walkHash reads the hash tables in chunks of chunkBuckets, then again one
// by one the buckets of the chunks that stopped; what is still left is
// cut.
func (w *NodeWalk) walkHash(v NodeVisitor) error {
	c := &hashCounter{v: v}
	if err := w.hashPass(c, 0, chunkBuckets, 0); err != nil {
		return err
	}
	left := c.left
	c.left, c.lost = nil, 0
	for _, r := range left {
		if err := w.hashPass(c, r.first, 1, r.first+r.n); err != nil {
			return err
		}
	}
	if n := c.lost + sumLeft(c.left); n > 0 {
		v.Cut(n)
	}
	return nil
}

// hashPass reads chunks of per buckets from bucket base (a multiple of
// per) up to end (0: the last), as many chunks per read of the iterator as
// there are task objects, until the program says it is past the end.
func (w *NodeWalk) hashPass(c *hashCounter, base, per, end uint32) error {
	c.next, c.ended = base/per, false
	for _, set := range []struct {
		v   *ebpf.Variable
		val uint32
	}{{w.objs.ChunkBuckets, per}, {w.objs.ChunkEnd, end}, {w.objs.ChunkRecs, w.recs}} {
		if err := set.v.Set(set.val); err != nil {
			return err
		}
	}
	for !c.ended {
		if err := w.objs.ChunkBase.Set(c.next); err != nil {
			return err
		}
		before := c.next
		if err := w.read(w.links[2], sockRecord(c)); err != nil {
			return err
		}
		if !c.ended && c.next == before {
			return errors.New("a read of the hash walk read no chunk")
		}
	}
	return nil
}

// bucketRange is buckets [first, first+n) of the hash tables.
type bucketRange struct{ first, n uint32 }

func sumLeft(rs []bucketRange) int {
	n := 0
	for _, r := range rs {
		n += int(r.n)
	}
	return n
}

// hashCounter passes the hash walk's sockets on to v and keeps its
// markers: the next chunk to read, the end, the buckets left to read again
// (lost: those past maxLeft ranges).
type hashCounter struct {
	v     NodeVisitor
	next  uint32
	ended bool
	left  []bucketRange
	lost  int
}

func (c *hashCounter) Member(uint32, int, bool) {}
func (c *hashCounter) NetNS(*NetNSSettings)     {}
func (c *hashCounter) Cut(n int)                { c.lost += n }

func (c *hashCounter) Socket(r *SockRec) {
	switch r.Source {
	case SockSrcChunk:
		c.next = max(c.next, uint32(r.Inode)+1)
	case SockSrcEnd:
		c.ended = true
	case SockSrcCut:
		c.leftOver(r.Netns, uint32(r.Inode))
	default:
		c.v.Socket(r)
	}
}

// leftOver notes buckets a chunk left unread.
func (c *hashCounter) leftOver(first, n uint32) {
	if len(c.left) >= maxLeft {
		c.lost += int(n)
		return
	}
	c.left = append(c.left, bucketRange{first, n})
}

// read runs one iterator to its end, handing each record to rec.
func (w *NodeWalk) read(l *link.Iter, rec func(b []byte) (int, error)) error {
	rc, err := l.Open()
	if err != nil {
		return fmt.Errorf("creating the iterator: %w", err)
	}
	defer rc.Close()
	return readRecords(rc, w.buf, rec)
}

// readRecords reads r to its end into buf, handing each whole record to
// rec, which returns the record's size from its first bytes (0: more bytes
// are needed; an error: the stream is not what the programs write).
func readRecords(r io.Reader, buf []byte, rec func(b []byte) (int, error)) error {
	have := 0
	for {
		n, err := r.Read(buf[have:])
		have += n
		used, perr := records(buf[:have], rec)
		if perr != nil {
			return perr
		}
		have = copy(buf, buf[used:have])
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			if have != 0 {
				return fmt.Errorf("the stream ends in the middle of a record (%d bytes left)", have)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
	}
}

// records hands the whole records at the start of b to rec and returns
// the bytes they took.
func records(b []byte, rec func(b []byte) (int, error)) (int, error) {
	used := 0
	for used < len(b) {
		n, err := rec(b[used:])
		if err != nil {
			return used, err
		}
		if n == 0 {
			break
		}
		used += n
	}
	return used, nil
}

// sockRecord hands the sock_rec records of the files and hash walks to v
// (the hash walk's markers to its hashCounter).
func sockRecord(v NodeVisitor) func(b []byte) (int, error) {
	return func(b []byte) (int, error) {
		if len(b) < SockRecSize {
			return 0, nil
		}
		v.Socket((*SockRec)(unsafe.Pointer(&b[0])))
		return SockRecSize, nil
	}
}

// Records of the task walk (bpf/nodewalk.h).
type (
	nodeMember   = nodewalkNodewalkMember
	nodeNetNS    = nodewalkNodewalkNetns
	nodeReserved = nodewalkNodewalkReserved
)

var (
	nodeMemberSize   = int(unsafe.Sizeof(nodeMember{}))
	nodeNetNSSize    = int(unsafe.Sizeof(nodeNetNS{}))
	nodeReservedSize = int(unsafe.Sizeof(nodeReserved{}))
)

// taskRecord hands the records of the task walk to v: each member, and
// each netns's settings once its reserved ports (the record after them)
// are read too.
func taskRecord(v NodeVisitor) func(b []byte) (int, error) {
	var pending NetNSSettings // a netns whose reserved ports come next
	return func(b []byte) (int, error) {
		if len(b) < 4 {
			return 0, nil
		}
		kind := binary.NativeEndian.Uint32(b)
		size := taskRecordSize(kind)
		switch {
		case size == 0:
			return 0, fmt.Errorf("a record of kind unknown:%d", kind)
		case len(b) < size:
			return 0, nil
		}
		switch kind {
		case uint32(nodewalkNodewalkKindNODEWALK_MEMBER):
			m := (*nodeMember)(unsafe.Pointer(&b[0]))
			v.Member(m.Netns, int(m.Pid), m.Flags&uint32(nodewalkNodewalkFlagNODEWALK_F_KTHREAD) != 0)
		case uint32(nodewalkNodewalkKindNODEWALK_NETNS):
			pending = netnsSettings((*nodeNetNS)(unsafe.Pointer(&b[0])))
		default:
			r := (*nodeReserved)(unsafe.Pointer(&b[0]))
			if r.Netns != pending.NetNS {
				return 0, fmt.Errorf("the reserved ports of net:[%d] after the settings of net:[%d]", r.Netns, pending.NetNS)
			}
			pending.Reserved = ReservedSpans(r.Bits[:])
			v.NetNS(&pending)
			pending = NetNSSettings{}
		}
		return size, nil
	}
}

// taskRecordSize is the size of a task walk record of kind; 0 for a kind
// the program never writes.
func taskRecordSize(kind uint32) int {
	switch kind {
	case uint32(nodewalkNodewalkKindNODEWALK_MEMBER):
		return nodeMemberSize
	case uint32(nodewalkNodewalkKindNODEWALK_NETNS):
		return nodeNetNSSize
	case uint32(nodewalkNodewalkKindNODEWALK_RESERVED):
		return nodeReservedSize
	}
	return 0
}

func netnsSettings(n *nodeNetNS) NetNSSettings {
	s := NetNSSettings{NetNS: n.Netns, PortLo: int(n.PortLo), PortHi: int(n.PortHi), UnprivilegedStart: int(n.UnprivStart),
		TWReuse: int(n.TwReuse), TWReuseDelayMS: -1, OwnHash: n.Flags&uint32(nodewalkNodewalkFlagNODEWALK_F_OWN_EHASH) != 0}
	if n.Flags&uint32(nodewalkNodewalkFlagNODEWALK_F_TW_DELAY) != 0 {
		s.TWReuseDelayMS = int(n.TwReuseDelay)
	}
	return s
}

// ReservedSpans turns the kernel's bitmap of reserved ports (bit p of the
// words, least significant first, is port p) into spans, in order.
func ReservedSpans(bits []uint64) []portmodel.Span {
	var out []portmodel.Span
	for p := 0; p < len(bits)*64; p++ {
		if bits[p/64] == 0 {
			p += 63 - p%64 // the rest of an empty word
			continue
		}
		if bits[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Hi == p-1 {
			out[n-1].Hi = p
		} else {
			out = append(out, portmodel.Span{Lo: p, Hi: p})
		}
	}
	return out
}
