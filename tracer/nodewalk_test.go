//go:build linux

package tracer

import (
	"fmt"
	"os/exec"

	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

func newNodeWalk(t *testing.T) *NodeWalk {
	t.Helper()
	testenv.RequireRoot(t)
	w, err := NewNodeWalk()
	if err != nil {
		t.Fatalf("NewNodeWalk: %+v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// collect is a NodeVisitor that keeps everything a walk reads, by netns.
type collect struct {
	t        *testing.T
	nowMS    int64
	members  map[uint32][]int
	settings map[uint32]NetNSSettings
	socks    map[uint32][]portmodel.Socket
	seen     map[uint64]bool
	records  map[uint32]int // per netns, before a socket only bound seen twice is dropped
	cut      int
}

func newCollect(t *testing.T) *collect {
	_, ms := monotonic(t)
	return &collect{t: t, nowMS: ms, members: map[uint32][]int{}, settings: map[uint32]NetNSSettings{},
		socks: map[uint32][]portmodel.Socket{}, seen: map[uint64]bool{}, records: map[uint32]int{}}
}

func (c *collect) Member(netns uint32, pid int, kthread bool) {
	c.members[netns] = append(c.members[netns], pid)
}

func (c *collect) NetNS(s *NetNSSettings) {
	if _, ok := c.settings[s.NetNS]; ok {
		c.t.Errorf("the settings of net:[%d] came twice in one walk", s.NetNS)
	}
	c.settings[s.NetNS] = *s
}

func (c *collect) Socket(r *SockRec) {
	if _, ok := c.settings[r.Netns]; !ok && c.members[r.Netns] != nil {
		c.t.Errorf("a socket of net:[%d] before its settings", r.Netns)
	}
	c.records[r.Netns]++
	if r.Inode != 0 && c.seen[r.Inode] {
		return // a bound-only socket behind another fd
	}
	c.seen[r.Inode] = r.Inode != 0
	s, err := Socket(r, c.nowMS)
	if err != nil {
		c.t.Fatal(err)
	}
	c.socks[r.Netns] = append(c.socks[r.Netns], s)
}

func (c *collect) Cut(n int) { c.cut += n }

// sockKey is a socket as text with every field, but the TIME_WAIT stamps
// are compared to the second (the walks widen tw_entry_stamp against their
// own clocks).
func sockKey(s portmodel.Socket) string {
	s.TW.StampMS /= 1000
	return fmt.Sprintf("%+v", s)
}

func keys(socks []portmodel.Socket) []string {
	var out []string
	for _, s := range socks {
		if s.Proto == portmodel.TCP {
			out = append(out, sockKey(s))
		}
	}
	slices.Sort(out)
	return out
}

// TestNodeWalkEqualsSockIter: one walk of the node reads, for each of three
// netns with one socket of every kind the port rules tell apart (listeners,
// connections by connect() and by bind(), sockets only bound, TIME_WAIT with
// and without timestamps, a FIN_WAIT2 minisocket, an orphan, an unaccepted
// connection, a request socket), exactly the TCP sockets the per-netns
// iterators read there, field for field; each netns's settings once, with
// the range, reserved ports and tcp_tw_reuse the test set; and the process
// the test started in it.
func TestNodeWalkEqualsSockIter(t *testing.T) {
	w := newNodeWalk(t)
	it := newSockIter(t)
	type made struct {
		ns  *netns.NS
		pid int
	}
	var all []made
	for i := range 3 {
		ns := testns.New(t)
		for name, v := range map[string]string{"net.ipv4.ip_local_port_range": fmt.Sprintf("%d 50999", 40000+i),
			"net.ipv4.ip_local_reserved_ports": fmt.Sprintf("41000-41009,%d", 45000+i), "net.ipv4.tcp_tw_reuse": fmt.Sprint(i % 3)} {
			if err := ns.SetSysctl(name, v); err != nil {
				t.Fatal(err)
			}
		}
		sc := newScene(t, ns)
		l := sc.listen()
		sc.expect("listener", full(t, l, portmodel.TCP, tcpListen, portmodel.BucketByBind))
		sc.openSockets(l)
		sc.closingSockets(it, l)
		settled(t, it, sc)
		all = append(all, made{ns, startSleep(t, ns)})
	}
	c := newCollect(t)
	if err := w.Walk(c, false); err != nil {
		t.Fatal(err)
	}
	if c.cut != 0 {
		t.Errorf("the walk cut %d buckets on an idle node", c.cut)
	}
	for i, m := range all {
		ino := uint32(m.ns.Inode())
		want, got := keys(readIn(t, it, m.ns)), keys(c.socks[ino])
		if !slices.Equal(got, want) {
			t.Errorf("%s: the walk read\n%s\nthe iterators read\n%s", m.ns, fmtKeys(got), fmtKeys(want))
		}
		s := c.settings[ino]
		if s.PortLo != 40000+i || s.PortHi != 50999 || s.TWReuse != i%3 || s.OwnHash ||
			fmt.Sprint(s.Reserved) != fmt.Sprintf("[{41000 41009} {%d %d}]", 45000+i, 45000+i) {
			t.Errorf("%s: settings %+v", m.ns, s)
		}
		if !slices.Contains(c.members[ino], m.pid) {
			t.Errorf("%s: members %v, not the process started in it (%d)", m.ns, c.members[ino], m.pid)
		}
	}
}

// settled waits until the scene's sockets are in the states it made them
// in (an orphan's FIN is acknowledged, the TIME_WAITs' server sides gone):
// the walk and the iterators, read one after the other, then see the same.
func settled(t *testing.T, it *SockIter, sc *scene) {
	t.Helper()
	waitRead(t, it, sc.ns, "the sockets in the states made", func(socks []portmodel.Socket) bool {
		for _, w := range sc.want {
			if got := find(socks, w.Proto, w.Local, w.Remote); len(got) != 1 || got[0].State != w.State || got[0].TW.Known != w.TW.Known {
				return false
			}
		}
		return len(socks) == len(sc.want)
	})
}

func fmtKeys(ks []string) string {
	out := ""
	for _, k := range ks {
		out += "  " + k + "\n"
	}
	return out
}

// startSleep starts a process in ns for the test's life.
func startSleep(t *testing.T, ns *netns.NS) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// A chunk that fills its buffer stops, and its other buckets are read
// again one by one: with a buffer of 2 records the walk reads the same
// sockets of the test's netns as with the whole buffer, none twice, none
// left out. The walk's cut count is not the test's to check: it is the
// node's, and the hash tables are shared by every netns, so a bucket of
// another netns holding more than 2 sockets (the TIME_WAITs the tests
// before leave in the host's) is cut with a buffer of 2; a cut bucket
// of the test's would leave its sockets out, which the comparison sees.
func TestNodeWalkRereadsStoppedChunks(t *testing.T) {
	w := newNodeWalk(t)
	ns := testns.New(t)
	sc := newScene(t, ns)
	l := sc.listen()
	for range 40 { // connections toward one destination: neighbouring buckets
		c := sc.socket(unix.SOCK_STREAM)
		sc.connect(c, sockName(t, l, false))
		sc.accept(l)
	}
	read := func(recs uint32) *collect {
		w.recs = recs
		c := newCollect(t)
		if err := w.Walk(c, false); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ino := uint32(ns.Inode())
	whole, small := read(0), read(2)
	got, want := keys(small.socks[ino]), keys(whole.socks[ino])
	if !slices.Equal(got, want) || len(want) != 81 || small.records[ino] != 81 {
		t.Errorf("read with a buffer of 2: %d sockets (%d records); with the whole buffer %d; want the same 81, none twice",
			len(got), small.records[ino], len(want))
	}
	t.Logf("buckets cut on the node: %d with a buffer of 2, %d with the whole buffer", small.cut, whole.cut)
}
