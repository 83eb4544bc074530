package diagnose

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// DropBook keeps the node's recent drops of new flows' first packets
// (tracer.NodeDrops, decoded), by flow, so that a connect() that timed out
// can be told which layer dropped its SYNs (nodelayer.go). Add is called by
// the drops' reader, off the failures' path: it reads conntrack's counters
// in the dropping netns (CTNETLINK, as conntrack -S) to say which moved,
// and names the input device there. Lookup is safe beside it, and names
// the kernel function that freed the packet: a first scan of /proc/kallsyms
// takes a second on a slow node, which the reader must not wait for (the
// drops behind it would be missing from a diagnosis made meanwhile).
type DropBook struct {
	// Missed is the kernel's count of drops held back by the rate limit or
	// lost (ring full) so far; nil: none.
	Missed func() uint64
	Ksyms  *netdiag.Kallsyms // names the function that freed a packet
	// Counters reads conntrack's counters in the calling thread's netns;
	// nil: nodeport.ReadConntrackCounters.
	Counters func() (nodeport.ConntrackCounters, error)
	// Drained is the reader's mark (tracer.NodeDrops.Drained): every drop
	// before it is in the book. nil: the book is taken as always current.
	Drained func() time.Time

	mu       sync.Mutex
	since    time.Time // watching since
	flows    map[decode.Flow]*FlowDrops
	order    []decode.Flow // insertion order, for the bound
	max      int
	missed   uint64
	missedAt time.Time // when Missed was last seen to grow
	nets     map[uint32]*dropNetns
	unreach  map[uint32]time.Time // netns not entered, and when: not searched again for goneFor
	now      func() time.Time
	sleep    func(time.Duration)
}

// FlowDrops are the drops of one flow's first packets.
type FlowDrops struct {
	First decode.NodeDrop // the first drop
	Last  time.Time
	N     int    // drops seen (the rate limit may have held more back)
	InDev string // the input device's name in the dropping netns ("" when none or not read)
	Where string // the kernel function that freed it (nf_hook_slow, nft_do_chain, ...), named by Lookup; "" when not known
	// Conntrack's counters in the dropping netns: how much each moved
	// between the read before a drop and the read after it, summed over
	// the Counted drops that had a read before.
	InsertFailed, CTDrop uint64
	Counted              int
	CountersErr          string // why they could not be read
}

// dropNetns is a dropping netns, kept open, with its last counters.
type dropNetns struct {
	ns     *netdiag.Netns
	last   nodeport.ConntrackCounters
	lastAt time.Time // when last was read
	has    bool
	devs   map[int]string
}

// NewDropBook returns a book of at most max flows, watching from now.
func NewDropBook(max int) *DropBook {
	return &DropBook{since: time.Now(), flows: map[decode.Flow]*FlowDrops{}, max: max, nets: map[uint32]*dropNetns{},
		unreach: map[uint32]time.Time{}, now: time.Now, sleep: time.Sleep}
}

// Since is when the book started watching.
func (b *DropBook) Since() time.Time { return b.since }

// Add records d: which counters moved in its netns, its input device's name.
func (b *DropBook) Add(d decode.NodeDrop) {
	if d.Orig.Src.Addr().Is4In6() || d.Orig.Dst.Addr().Is4In6() {
		d.Orig = unmapFlow(d.Orig)
	}
	moved, known, dev, cerr := b.readNetns(d)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checkMissed()
	f := b.flows[d.Orig]
	if f == nil {
		if len(b.order) >= b.max {
			delete(b.flows, b.order[0])
			b.order = b.order[1:]
		}
		f = &FlowDrops{First: d, InDev: dev}
		b.flows[d.Orig] = f
		b.order = append(b.order, d.Orig)
	}
	f.N++
	f.Last = d.Time
	if known {
		f.Counted++
		f.InsertFailed += moved.InsertFailed
		f.CTDrop += moved.Drop
	}
	if cerr != "" {
		f.CountersErr = cerr
	}
}

// drainPoll is how often CurrentAt looks at the reader's mark.
const drainPoll = 10 * time.Millisecond

// CurrentAt waits, up to max, until every drop before t is in the book;
// false when the reader is still behind (a busy node, a flood of drops):
// then no drop found for a flow says nothing.
func (b *DropBook) CurrentAt(t time.Time, max time.Duration) bool {
	if b.Drained == nil {
		return true
	}
	for deadline := b.now().Add(max); ; b.sleep(drainPoll) {
		if !b.Drained().Before(t) {
			return true
		}
		if !b.now().Before(deadline) {
			return false
		}
	}
}

// Lookup is the drops of flow f (its source and destination as the client
// made it), if any, with the function that freed the first named (outside
// the book's lock: Add goes on while /proc/kallsyms is read).
func (b *DropBook) Lookup(f decode.Flow) (FlowDrops, bool) {
	b.mu.Lock()
	b.checkMissed()
	x, ok := b.flows[unmapFlow(f)]
	var out FlowDrops
	if ok {
		out = *x
	}
	b.mu.Unlock()
	if ok && b.Ksyms != nil {
		out.Where = b.Ksyms.Func(out.First.Location)
	}
	return out, ok
}

// MissedSince: whether drops were held back or lost at or after t (as far
// as the book saw them grow).
func (b *DropBook) MissedSince(t time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checkMissed()
	return !b.missedAt.IsZero() && !b.missedAt.Before(t)
}

func (b *DropBook) checkMissed() {
	if b.Missed == nil {
		return
	}
	if n := b.Missed(); n > b.missed {
		b.missed, b.missedAt = n, b.now()
	}
}

// Watch reads conntrack's counters of netns inode now, so that its first
// drop already has a read before it (the node's netns, at start).
func (b *DropBook) Watch(inode uint32) error {
	_, _, _, errText := b.readNetns(decode.NodeDrop{NetNS: inode})
	if errText != "" {
		return errors.New(errText)
	}
	return nil
}

func netipUnmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

func unmapFlow(f decode.Flow) decode.Flow {
	f.Src = netipUnmap(f.Src)
	f.Dst = netipUnmap(f.Dst)
	return f
}

// readNetns reads, in d's netns, conntrack's counters (how much they moved
// since the last read there: known when there was one) and the input
// device's name.
func (b *DropBook) readNetns(d decode.NodeDrop) (moved nodeport.ConntrackCounters, known bool, dev, errText string) {
	n, err := b.openNetns(d.NetNS)
	if err != nil {
		return moved, false, "", err.Error()
	}
	read := b.Counters
	if read == nil {
		read = nodeport.ReadConntrackCounters
	}
	var cur nodeport.ConntrackCounters
	var cerr error
	dev, devKnown := n.devs[d.InIfindex]
	err = n.ns.Do(func() error {
		cur, cerr = read()
		if !devKnown && d.InIfindex > 0 {
			if i, err := net.InterfaceByIndex(d.InIfindex); err == nil {
				dev = i.Name
			}
		}
		return nil
	})
	if err != nil || cerr != nil {
		delete(b.nets, d.NetNS)
		n.ns.Close()
		if cerr != nil {
			return moved, false, dev, cerr.Error()
		}
		return moved, false, dev, err.Error()
	}
	if d.InIfindex > 0 && !devKnown && len(n.devs) < 1024 {
		n.devs[d.InIfindex] = dev
	}
	// A move says what this drop did only when the read before it came
	// before it: a reader that lags reads after several drops, and the
	// first read then holds all their moves (a full table's drops read
	// +0 each, as a rule's would).
	before := n.has && n.lastAt.Before(d.Time)
	if before {
		moved = nodeport.ConntrackCounters{InsertFailed: cur.InsertFailed - n.last.InsertFailed, Drop: cur.Drop - n.last.Drop}
	}
	n.last, n.lastAt, n.has = cur, b.now(), true
	return moved, before, dev, ""
}

// openNetns is the dropping netns, kept open (at most 16).
func (b *DropBook) openNetns(inode uint32) (*dropNetns, error) {
	if n, ok := b.nets[inode]; ok {
		return n, nil
	}
	if at, ok := b.unreach[inode]; ok && b.now().Sub(at) < goneFor {
		return nil, errNetNSGone // each search walks /proc: not for every drop
	}
	ns, err := netdiag.OpenNetns(uint64(inode))
	if err != nil {
		if len(b.unreach) >= 1024 {
			clear(b.unreach)
		}
		b.unreach[inode] = b.now()
		return nil, err
	}
	delete(b.unreach, inode)
	if len(b.nets) >= 16 {
		for k, n := range b.nets {
			n.ns.Close()
			delete(b.nets, k)
		}
	}
	n := &dropNetns{ns: ns, devs: map[int]string{}}
	b.nets[inode] = n
	return n, nil
}

// Close closes the netns the book keeps open.
func (b *DropBook) Close() {
	for k, n := range b.nets {
		n.ns.Close()
		delete(b.nets, k)
	}
}
