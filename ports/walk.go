package ports

import (
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/tracer"
)

// NodeDests bounds the destinations the tallies of one sample count apart,
// all netns together: each netns gets NodeDests divided among the netns of
// the node, and at least MinDests.
const (
	NodeDests = 1 << 17
	MinDests  = 512
)

// walked is what one node walk read: the processes and their netns, and
// each netns's settings and tally.
type walked struct {
	nowSec, nowMS int64
	members       map[uint64]int // netns inode: a process in it, a user process rather than a kernel thread
	kthread       map[uint64]bool
	netns         map[uint32]*walkedNetNS
	cut, bad      int // buckets and sockets the walk could not read; records that made no socket
}

// walkedNetNS is one netns of a walk.
type walkedNetNS struct {
	ps    netdiag.PortSysctls
	sys   portmodel.Sysctls
	own   bool // its sockets are in hash tables of its own: read apart
	tally *portmodel.Tally
}

func newWalked(nowSec, nowMS int64) *walked {
	return &walked{nowSec: nowSec, nowMS: nowMS, members: map[uint64]int{}, kthread: map[uint64]bool{}, netns: map[uint32]*walkedNetNS{}}
}

// Member keeps a process of each netns, a user process over a kernel
// thread: it is what a person recognises (diagnose.NetNSMembers).
func (w *walked) Member(netns uint32, pid int, kthread bool) {
	ino := uint64(netns)
	if _, ok := w.members[ino]; !ok || (w.kthread[ino] && !kthread) {
		w.members[ino], w.kthread[ino] = pid, kthread
	}
}

// NetNS keeps a netns's settings; its tally is made at its first socket.
func (w *walked) NetNS(s *tracer.NetNSSettings) {
	ps := netdiag.PortSysctls{RangeLo: s.PortLo, RangeHi: s.PortHi, UnprivilegedStart: s.UnprivilegedStart, TCPTWReuse: s.TWReuse}
	for _, r := range s.Reserved {
		ps.Reserved = append(ps.Reserved, netdiag.PortSpan{Lo: r.Lo, Hi: r.Hi})
	}
	sys := ps.Model()
	sys.TWReuseDelayMS, sys.NowSec, sys.NowMS = s.TWReuseDelayMS, w.nowSec, w.nowMS
	w.netns[s.NetNS] = &walkedNetNS{ps: ps, sys: sys, own: s.OwnHash}
}

// Socket counts a socket into its netns's tally. The sockets of a netns
// the walk has no settings of (no process in it) are left to be read
// apart.
func (w *walked) Socket(r *tracer.SockRec) {
	n := w.netns[r.Netns]
	if n == nil || n.own {
		return
	}
	sk, err := tracer.Socket(r, w.nowMS)
	if err != nil {
		w.bad++
		return
	}
	w.tallyOf(n).Add(&sk)
}

func (w *walked) Cut(n int) { w.cut += n }

// tallyOf is n's tally, made on first use with its share of NodeDests.
func (w *walked) tallyOf(n *walkedNetNS) *portmodel.Tally {
	if n.tally == nil {
		n.tally = portmodel.NewTally(n.sys, max(MinDests, NodeDests/max(len(w.netns), 1)))
	}
	return n.tally
}
