//go:build linux

package tracer

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
	"golang.org/x/sys/unix"
)

// TCP states (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpSynSent     = 2
	tcpSynRecv     = 3
	tcpFinWait2    = 5
	tcpTimeWait    = 6
	tcpClose       = 7
	tcpCloseWait   = 8
	tcpListen      = 10
)

// timeWait makes a connection to l and closes the client side first, so
// that it ends in TIME_WAIT once the server side closes too; the client is
// bound to port 0 first when bind is set. It returns the client's address.
func (s *scene) timeWait(l int, bind bool) netip.AddrPort {
	s.t.Helper()
	c := s.socket(unix.SOCK_STREAM)
	if bind {
		s.bind0(c)
	}
	s.connect(c, sockName(s.t, l, false))
	srv := s.accept(l)
	local := sockName(s.t, c, false)
	s.closeClientFirst(c, srv)
	return local
}

// kernelHasTWEntryStamp says whether the running kernel's
// inet_timewait_sock has tw_entry_stamp (6.13+), from its BTF.
func kernelHasTWEntryStamp(t *testing.T) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	var tw *btf.Struct
	if err := spec.TypeByName("inet_timewait_sock", &tw); err != nil {
		t.Fatal(err)
	}
	for _, m := range tw.Members {
		if m.Name == "tw_entry_stamp" {
			return true
		}
	}
	return false
}

// TestSockIterReadsWhatWasMade makes one socket of each kind the port rules
// tell apart in a throwaway netns and checks every field the iterator reads
// of each against what the test made, and against ss.
func TestSockIterReadsWhatWasMade(t *testing.T) {
	it := newSockIter(t)
	ns := testns.New(t)
	sc := newScene(t, ns)
	startSec, startMS := monotonic(t)
	l := sc.listen()
	sc.expect("listener", full(t, l, portmodel.TCP, tcpListen, portmodel.BucketByBind))
	sc.openSockets(l)
	sc.closingSockets(it, l)
	socks := waitRead(t, it, ns, "the orphan in FIN_WAIT2, the TIME_WAITs and their server sides gone", func(socks []portmodel.Socket) bool {
		for _, w := range sc.want {
			if got := find(socks, w.Proto, w.Local, w.Remote); len(got) != 1 || got[0].State != w.State || got[0].TW.Known != w.TW.Known {
				return false
			}
		}
		return len(socks) == len(sc.want) // the TIME_WAITs' server sides left LAST_ACK
	})
	endSec, endMS := monotonic(t)
	checkSockets(t, socks, sc.want, startSec, endSec, startMS, endMS)
	checkSS(t, ns, socks)
}

// openSockets makes the sockets that stay open: connections to l (with the
// port from connect(), or bound to port 0 first), sockets that are only
// bound, a listener with SO_REUSEADDR and SO_REUSEPORT, UDP sockets, an
// unaccepted connection and a request socket.
func (s *scene) openSockets(l int) {
	t := s.t
	lAddr := sockName(t, l, false)
	c1 := s.socket(unix.SOCK_STREAM)
	s.connect(c1, lAddr)
	s.expect("port by connect", full(t, c1, portmodel.TCP, tcpEstablished, portmodel.BucketByConnect))
	s.expect("accepted", full(t, s.accept(l), portmodel.TCP, tcpEstablished, portmodel.BucketByBind))
	c2 := s.socket(unix.SOCK_STREAM)
	s.bind0(c2)
	s.connect(c2, lAddr)
	s.expect("bound, connected", full(t, c2, portmodel.TCP, tcpEstablished, portmodel.BucketByBind))
	s.expect("its peer", full(t, s.accept(l), portmodel.TCP, tcpEstablished, portmodel.BucketByBind))
	b := s.socket(unix.SOCK_STREAM, sockopt(unix.SO_REUSEADDR), bindToDevice("lo"))
	s.bind0(b)
	s.expect("bound only", full(t, b, portmodel.TCP, tcpClose, portmodel.BucketByBind, func(w *portmodel.Socket) {
		w.Reuse, w.BoundDev = true, 1 // lo is ifindex 1 in a new netns
	}))
	r := s.listen(sockopt(unix.SO_REUSEADDR), sockopt(unix.SO_REUSEPORT))
	s.expect("reuse listener", full(t, r, portmodel.TCP, tcpListen, portmodel.BucketByBind, func(w *portmodel.Socket) {
		w.Reuse, w.ReusePort = true, true
	}))
	// A SO_REUSEADDR socket bound to the port a SO_REUSEADDR connect() got:
	// no conflict (both reuse, neither listens), and inet_csk_update_fastreuse
	// leaves fastreuse at -1 (the binder reuses) but sets fastreuseport to 0:
	// the bucket now counts as made by bind() for both.
	reuse := func(w *portmodel.Socket) { w.Reuse = true }
	rc := s.socket(unix.SOCK_STREAM, sockopt(unix.SO_REUSEADDR))
	s.connect(rc, lAddr)
	s.expect("its server side", full(t, s.accept(l), portmodel.TCP, tcpEstablished, portmodel.BucketByBind))
	rb := s.socket(unix.SOCK_STREAM, sockopt(unix.SO_REUSEADDR))
	rcAddr := sockName(t, rc, false)
	if err := unix.Bind(rb, &unix.SockaddrInet4{Addr: rcAddr.Addr().As4(), Port: int(rcAddr.Port())}); err != nil {
		t.Fatalf("bind to the port of a connected socket, both SO_REUSEADDR: %v", err)
	}
	s.expect("reuse, port by connect", full(t, rc, portmodel.TCP, tcpEstablished, portmodel.BucketByBind, reuse))
	s.expect("reuse bound on it", full(t, rb, portmodel.TCP, tcpClose, portmodel.BucketByBind, reuse))
	u := s.socket(unix.SOCK_DGRAM)
	s.bind0(u)
	uc := s.socket(unix.SOCK_DGRAM)
	s.connect(uc, sockName(t, u, false))
	s.expect("udp bound", full(t, u, portmodel.UDP, tcpClose, portmodel.BucketUnknown))
	s.expect("udp connected", full(t, uc, portmodel.UDP, tcpEstablished, portmodel.BucketUnknown))
	s.queued()
}

// queued makes a connection nobody accepts (its server side has no socket,
// and so no inode, yet, and is no orphan), and one whose server side stays
// a request socket: with TCP_DEFER_ACCEPT the listener drops the
// handshake's last ACK when it brings no data.
func (s *scene) queued() {
	t := s.t
	l2 := s.listen()
	qc := s.socket(unix.SOCK_STREAM)
	s.connect(qc, sockName(t, l2, false))
	s.expect("second listener", full(t, l2, portmodel.TCP, tcpListen, portmodel.BucketByBind))
	s.expect("unaccepted's peer", full(t, qc, portmodel.TCP, tcpEstablished, portmodel.BucketByConnect))
	s.expect("unaccepted", portmodel.Socket{Proto: portmodel.TCP, State: tcpEstablished, Local: sockName(t, l2, false), Remote: sockName(t, qc, false), Bucket: portmodel.BucketByBind, Known: true})
	l3 := s.listen(func(fd int) error { return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 600) })
	dc := s.socket(unix.SOCK_STREAM)
	s.connect(dc, sockName(t, l3, false))
	s.expect("deferred listener", full(t, l3, portmodel.TCP, tcpListen, portmodel.BucketByBind))
	s.expect("deferred client", full(t, dc, portmodel.TCP, tcpEstablished, portmodel.BucketByConnect))
	s.expect("request socket", portmodel.Socket{Proto: portmodel.TCP, State: tcpSynRecv, Local: sockName(t, l3, false), Remote: sockName(t, dc, false)})
}

// closingSockets makes the sockets a close() leaves: TIME_WAITs with and
// without timestamps, a FIN_WAIT2 minisocket, a full orphan in FIN_WAIT2,
// and the peers of the last two, in CLOSE_WAIT.
func (s *scene) closingSockets(it *SockIter, l int) {
	t := s.t
	lAddr := sockName(t, l, false)
	s.expect("time_wait ts", portmodel.Socket{Proto: portmodel.TCP, State: tcpTimeWait, Local: s.timeWait(l, true), Remote: lAddr, Bucket: portmodel.BucketByBind, Known: true, TW: portmodel.TimeWait{Known: true, TSRecent: true}})
	// With the default tcp_fin_timeout (60s) an orphan that reaches
	// FIN_WAIT2 becomes a minisocket (tcp_time_wait(sk, TCP_FIN_WAIT2)).
	fw := s.socket(unix.SOCK_STREAM)
	s.connect(fw, lAddr)
	fwAddr := sockName(t, fw, false)
	s.expect("fin_wait2 peer", full(t, s.accept(l), portmodel.TCP, tcpCloseWait, portmodel.BucketByBind))
	s.close(fw)
	s.expect("fin_wait2 mini", portmodel.Socket{Proto: portmodel.TCP, State: tcpFinWait2, Local: fwAddr, Remote: lAddr, Bucket: portmodel.BucketByConnect, Known: true, Orphan: true, TW: portmodel.TimeWait{Known: true, TSRecent: true}})
	// Before tcp_fin_timeout changes below: the peer may delay its ACK.
	waitRead(t, it, s.ns, "the FIN_WAIT2 minisocket", func(socks []portmodel.Socket) bool {
		got := find(socks, portmodel.TCP, fwAddr, lAddr)
		return len(got) == 1 && got[0].State == tcpFinWait2 && got[0].TW.Known
	})
	if err := s.ns.SetSysctl("net.ipv4.tcp_timestamps", "0"); err != nil {
		t.Fatal(err)
	}
	s.expect("time_wait no ts", portmodel.Socket{Proto: portmodel.TCP, State: tcpTimeWait, Local: s.timeWait(l, false), Remote: lAddr, Bucket: portmodel.BucketByConnect, Known: true, TW: portmodel.TimeWait{Known: true}})
	// A longer tcp_fin_timeout keeps an orphan in FIN_WAIT2 a full socket
	// (tcp_close: tcp_fin_time() > TCP_TIMEWAIT_LEN) for 10 minutes.
	if err := s.ns.SetSysctl("net.ipv4.tcp_fin_timeout", "660"); err != nil {
		t.Fatal(err)
	}
	o := s.socket(unix.SOCK_STREAM)
	s.connect(o, lAddr)
	s.expect("orphan peer", full(t, s.accept(l), portmodel.TCP, tcpCloseWait, portmodel.BucketByBind))
	s.expect("fin_wait2 orphan", portmodel.Socket{Proto: portmodel.TCP, State: tcpFinWait2, Local: sockName(t, o, false), Remote: lAddr, Bucket: portmodel.BucketByConnect, Known: true, Orphan: true})
	s.close(o)
}

// checkSockets compares each socket read with the one the test made; the
// TIME_WAIT stamps must lie between the test's start and the read's end.
func checkSockets(t *testing.T, socks []portmodel.Socket, want map[string]portmodel.Socket, startSec, endSec, startMS, endMS int64) {
	t.Helper()
	entry := kernelHasTWEntryStamp(t)
	for name, w := range want {
		got := find(socks, w.Proto, w.Local, w.Remote)
		if len(got) != 1 {
			t.Errorf("%s: %d sockets %v -> %v, want 1", name, len(got), w.Local, w.Remote)
			continue
		}
		g := got[0]
		if g.TW.Known {
			if g.TW.TSRecent && (g.TW.StampSec < startSec || g.TW.StampSec > endSec) {
				t.Errorf("%s: tw_ts_recent_stamp %d s, want within [%d, %d] (CLOCK_MONOTONIC_COARSE)", name, g.TW.StampSec, startSec, endSec)
			}
			if !g.TW.TSRecent && g.TW.StampSec != 0 {
				t.Errorf("%s: no timestamps but tw_ts_recent_stamp %d", name, g.TW.StampSec)
			}
			if entry != (g.TW.StampMS != 0) || (entry && (g.TW.StampMS < startMS || g.TW.StampMS > endMS)) {
				t.Errorf("%s: tw_entry_stamp %d ms (kernel has it: %v), want within [%d, %d] (CLOCK_MONOTONIC)", name, g.TW.StampMS, entry, startMS, endMS)
			}
			g.TW.StampSec, g.TW.StampMS = 0, 0
		}
		if g != w {
			t.Errorf("%s:\n got  %+v\n want %+v", name, g, w)
		}
	}
	if len(socks) != len(want) {
		t.Errorf("read %d sockets, made %d:%s", len(socks), len(want), fmtSockets(socks))
	}
}

// checkSS compares what the iterators read of the hashed sockets with what
// ss (sock_diag) shows of them: state, addresses, inode. The sockets that
// are only bound are in no table sock_diag dumps.
func checkSS(t *testing.T, ns *netns.NS, socks []portmodel.Socket) {
	t.Helper()
	ss := ssLines(t, ns, "-tanHe")
	for k, n := range ssLines(t, ns, "-uanHe") {
		ss[k] += n
	}
	ours := map[string]int{}
	for _, s := range socks {
		if s.Proto == portmodel.TCP && s.State == tcpClose {
			continue
		}
		ours[ssKey(s)]++
	}
	if fmt.Sprint(ours) != fmt.Sprint(ss) {
		t.Errorf("ss disagrees:\n ours %v\n ss   %v", ours, ss)
	}
}

// someSockets makes in ns a listener, a connection to it, a socket that is
// only bound and a bound UDP socket, and returns their inodes.
func someSockets(t *testing.T, ns *netns.NS) map[uint64]bool {
	sc := newScene(t, ns)
	l := sc.listen()
	c := sc.socket(unix.SOCK_STREAM)
	sc.connect(c, sockName(t, l, false))
	srv := sc.accept(l)
	b := sc.socket(unix.SOCK_STREAM)
	sc.bind0(b)
	u := sc.socket(unix.SOCK_DGRAM)
	sc.bind0(u)
	inodes := map[uint64]bool{}
	for _, fd := range []int{l, c, srv, b, u} {
		inodes[inode(t, fd)] = true
	}
	return inodes
}

// TestSockIterNetnsIsolation: a read shows the sockets of its netns, all of
// them, and never one of another netns, though the same process holds them
// all (iter/task_file walks its files); and a read from a thread in another
// netns fails instead of answering for the wrong one.
func TestSockIterNetnsIsolation(t *testing.T) {
	it := newSockIter(t)
	ns1, ns2 := testns.New(t), testns.New(t)
	in1, in2 := someSockets(t, ns1), someSockets(t, ns2)
	for _, tc := range []struct {
		ns          *netns.NS
		mine, other map[uint64]bool
	}{{ns1, in1, in2}, {ns2, in2, in1}} {
		socks := readIn(t, it, tc.ns)
		seen := map[uint64]bool{}
		for _, s := range socks {
			seen[s.Inode] = true
			if tc.other[s.Inode] {
				t.Errorf("read of %s shows a socket of the other netns: %+v", tc.ns, s)
			}
		}
		for ino := range tc.mine {
			if !seen[ino] {
				t.Errorf("read of %s misses its socket inode %d:%s", tc.ns, ino, fmtSockets(socks))
			}
		}
		if len(socks) != len(tc.mine) {
			t.Errorf("read of %s: %d sockets, made %d:%s", tc.ns, len(socks), len(tc.mine), fmtSockets(socks))
		}
	}

	// This thread is not in ns1: the kernel would walk this thread's netns.
	var err error
	ns2.Do(func() error { _, err = it.Read(ns1.Inode()); return nil })
	if err == nil || !strings.Contains(err.Error(), "call it from a thread inside that netns") {
		t.Errorf("Read(%s) from a thread in %s: err %v, want the thread's netns named", ns1, ns2, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	socks, err := it.Read(self.Ino)
	if err != nil {
		t.Fatalf("Read of this thread's netns: %v", err)
	}
	for _, s := range socks {
		if in1[s.Inode] || in2[s.Inode] {
			t.Errorf("read of this thread's netns shows a throwaway netns's socket: %+v", s)
		}
	}
}

// TestSockIterIPv6 reads IPv6 sockets (tcp6 and its TIME_WAIT minisocket,
// tcp6_timewait_sock) and a v4-mapped one, which reads as IPv4.
func TestSockIterIPv6(t *testing.T) {
	it := newSockIter(t)
	ns := testns.New(t)
	sc := newScene(t, ns)
	startSec, startMS := monotonic(t)
	l := sc.socket6()
	if err := unix.Bind(l, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 8); err != nil {
		t.Fatal(err)
	}
	lAddr := sockName6(t, l)
	c := sc.socket6()
	if err := unix.Connect(c, &unix.SockaddrInet6{Addr: lAddr.Addr().As16(), Port: int(lAddr.Port())}); err != nil {
		t.Fatal(err)
	}
	srv := sc.accept(l)
	tw := sockName6(t, c)
	sc.closeClientFirst(c, srv)
	mapped := sc.socket6() // only bound, to ::ffff:127.0.0.1
	if err := unix.Bind(mapped, &unix.SockaddrInet6{Addr: netip.AddrFrom4(loopback.As4()).As16()}); err != nil {
		t.Fatal(err)
	}
	mAddr := sockName6(t, mapped)
	want := map[string]portmodel.Socket{
		"listener":  {Proto: portmodel.TCP, State: tcpListen, Local: lAddr, Bucket: portmodel.BucketByBind, Known: true, Inode: inode(t, l)},
		"time_wait": {Proto: portmodel.TCP, State: tcpTimeWait, Local: tw, Remote: lAddr, Bucket: portmodel.BucketByConnect, Known: true, TW: portmodel.TimeWait{Known: true, TSRecent: true}},
		"v4-mapped": {Proto: portmodel.TCP, State: tcpClose, Local: netip.AddrPortFrom(loopback, mAddr.Port()), Bucket: portmodel.BucketByBind, Known: true, Inode: inode(t, mapped)},
	}
	socks := waitRead(t, it, ns, "the IPv6 TIME_WAIT, its server side gone", func(socks []portmodel.Socket) bool {
		return len(socks) == len(want)
	})
	endSec, endMS := monotonic(t)
	checkSockets(t, socks, want, startSec, endSec, startMS, endMS)
}

// TestSockIterUID: the owner of a socket reads the same through iter/tcp
// (the iterator's uid) and through iter/task_file (sk_uid).
func TestSockIterUID(t *testing.T) {
	it := newSockIter(t)
	ns := testns.New(t)
	sc := newScene(t, ns)
	const uid = 4321
	asUID := func(fd *int) func() error {
		return func() error {
			// The socket's owner is the creating thread's fsuid; this
			// thread is locked (netns.NS.Do) and gets root back.
			unix.Setfsuid(uid)
			defer unix.Setfsuid(0)
			var err error
			*fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			return err
		}
	}
	var l, b int
	for _, fd := range []*int{&l, &b} {
		if err := ns.Do(asUID(fd)); err != nil {
			t.Fatal(err)
		}
		sc.open[*fd] = true
		sc.bind0(*fd)
	}
	if err := unix.Listen(l, 1); err != nil {
		t.Fatal(err)
	}
	socks := readIn(t, it, ns)
	for _, fd := range []int{l, b} {
		s := find(socks, portmodel.TCP, sockName(t, fd, false), netip.AddrPort{})
		if len(s) != 1 || s[0].UID != uid || s[0].Inode != inode(t, fd) {
			t.Errorf("socket %v made as uid %d: read %+v", sockName(t, fd, false), uid, s)
		}
	}
}

// BenchmarkSockIterRead reads a netns holding 2001 TCP sockets (1000
// connections to a listener, both sides); iter/task_file walks every file
// of every task of the machine as well.
func BenchmarkSockIterRead(b *testing.B) {
	testenv.RequireRoot(b)
	it, err := NewSockIter()
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	ns, err := netns.New()
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40999)
	if err != nil {
		b.Fatal(err)
	}
	defer ex.Close()
	b.ResetTimer()
	var n int
	for range b.N {
		err = ns.Do(func() error {
			socks, err := it.Read(ns.Inode())
			n = len(socks)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "sockets")
}

// A nil *SockIter (NewSockIter failed) passed on as a reader says so.
func TestNilSockIterRead(t *testing.T) {
	var it *SockIter
	if socks, err := it.Read(1); err == nil || socks != nil {
		t.Errorf("nil SockIter: Read = %v, %v; want an error", socks, err)
	}
}
