package netdiag

import (
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/tracer"
	"golang.org/x/sys/unix"
)

// portScene is a netns with its port sysctls set and one socket of each
// kind the snapshot must tell apart: a listener, a connection to it, a
// TIME_WAIT, an orphan in FIN_WAIT2, a TCP socket that is only bound, and a
// bound UDP socket.
type portScene struct {
	ns                *netns.NS
	n                 *Netns
	listener, boundTo netip.AddrPort
	timeWait, orphan  netip.AddrPort
	udp               netip.AddrPort
}

func newPortScene(t *testing.T) *portScene {
	ns, n := sandbox(t)
	for name, v := range map[string]string{
		"net.ipv4.ip_local_port_range":     "40000 40100",
		"net.ipv4.ip_local_reserved_ports": "40050-40052,40060",
		"net.ipv4.tcp_tw_reuse":            "1",
		// An orphan in FIN_WAIT2 stays a full socket for 10 minutes
		// (tcp_fin_time() > TCP_TIMEWAIT_LEN).
		"net.ipv4.tcp_fin_timeout": "660",
	} {
		if err := ns.SetSysctl(name, v); err != nil {
			t.Fatal(err)
		}
	}
	s := &portScene{ns: ns, n: n}
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s.listener = netip.MustParseAddrPort("127.0.0.1:8080")
	dial := func() (net.Conn, net.Conn) {
		c, err := ns.Dial("tcp4", s.listener.String())
		if err != nil {
			t.Fatal(err)
		}
		srv, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); srv.Close() })
		return c, srv
	}
	dial() // stays ESTABLISHED
	c, srv := dial()
	s.timeWait = netip.MustParseAddrPort(c.LocalAddr().String())
	c.Close() // the client closes first, then the server: the client's side ends in TIME_WAIT
	// The server closes once it has read the client's FIN (EOF): closed
	// sooner, as a loaded machine can order it, the two FINs cross, a
	// simultaneous close, and the server's side stays in TIME_WAIT too, for
	// 60 s, past the wait below (the 6.1 guest beside two busy loops).
	srv.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, srv); err != nil {
		t.Fatalf("reading to the client's FIN: %v", err)
	}
	srv.Close()
	c, _ = dial()
	s.orphan = netip.MustParseAddrPort(c.LocalAddr().String())
	c.Close() // the server never closes: the client's side is an orphan in FIN_WAIT2
	s.boundTo = bindIn(t, ns, unix.SOCK_STREAM)
	s.udp = bindIn(t, ns, unix.SOCK_DGRAM)
	var socks []Socket
	waitForSaying(t, "the TIME_WAIT (its server side gone) and the orphan's FIN_WAIT2", func() bool {
		var tw, fw, lastAck bool
		socks = dump(t, n, false)
		for _, d := range socks {
			tw = tw || d.Local == s.timeWait && d.State == StateTimeWait
			fw = fw || d.Local == s.orphan && d.State == StateFinWait2
			lastAck = lastAck || d.Remote == s.timeWait
		}
		return tw && fw && !lastAck
	}, func() string { return fmtSocks(socks) })
	return s
}

// bindIn binds a socket made in ns to 127.0.0.1 port 0, keeps it open until
// cleanup, and returns its address.
func bindIn(t *testing.T, ns *netns.NS, typ int) netip.AddrPort {
	var fd int
	err := ns.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(sa.(*unix.SockaddrInet4).Addr), uint16(sa.(*unix.SockaddrInet4).Port))
}

func newSockIter(t *testing.T) *tracer.SockIter {
	it, err := tracer.NewSockIter()
	if err != nil {
		t.Fatalf("NewSockIter: %+v", err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

// clock is portmodel.KernelClock: coarse seconds, fine ms.
type clock struct{ sec, ms int64 }

func kernelClock(t *testing.T) clock {
	sec, ms, err := portmodel.KernelClock()
	if err != nil {
		t.Fatal(err)
	}
	return clock{sec, ms}
}

func findLocal(socks []portmodel.Socket, proto portmodel.Proto, local netip.AddrPort, state uint8) (portmodel.Socket, bool) {
	i := slices.IndexFunc(socks, func(s portmodel.Socket) bool {
		return s.Proto == proto && s.Local == local && s.State == state
	})
	if i < 0 {
		return portmodel.Socket{}, false
	}
	return socks[i], true
}

// checkSysctls: the snapshot's settings are those the scene set, and its
// clock lies between before and the snapshot's return.
func checkSysctls(t *testing.T, s *portScene, sys portmodel.Sysctls, before clock) {
	t.Helper()
	after := kernelClock(t)
	delay := -1
	if v, err := s.ns.Sysctl("net.ipv4.tcp_tw_reuse_delay"); err == nil {
		delay, _ = strconv.Atoi(v)
	} else if _, serr := os.Stat("/proc/sys/net/ipv4/tcp_tw_reuse_delay"); serr == nil {
		t.Fatalf("tcp_tw_reuse_delay exists but reads %v", err)
	}
	got := sys
	got.NowSec, got.NowMS = 0, 0
	want := portmodel.Sysctls{Lo: 40000, Hi: 40100, Reserved: []portmodel.Span{{Lo: 40050, Hi: 40052}, {Lo: 40060, Hi: 40060}}, TWReuse: 1, TWReuseDelayMS: delay}
	if !slices.Equal(got.Reserved, want.Reserved) || got.Lo != want.Lo || got.Hi != want.Hi || got.TWReuse != want.TWReuse || got.TWReuseDelayMS != want.TWReuseDelayMS {
		t.Errorf("sysctls %+v, want %+v", got, want)
	}
	if sys.NowMS < before.ms || sys.NowMS > after.ms || sys.NowSec < before.sec || sys.NowSec > after.sec {
		t.Errorf("Now %d s %d ms, want within [%+v, %+v] of KernelClock", sys.NowSec, sys.NowMS, before, after)
	}
}

// TestPortSnapshotIterator: with a socket reader the snapshot holds what
// only the iterator knows (the bound-only socket, buckets, TIME_WAIT stamps
// no later than Now), UDP only when asked, and says where it came from.
// The reader (tracer.SockIter) fails unless called inside the netns.
func TestPortSnapshotIterator(t *testing.T) {
	s := newPortScene(t)
	it := newSockIter(t)
	before := kernelClock(t)
	sys, socks, src, err := s.n.PortSnapshotAll(it, false)
	if err != nil || src != SourceIterator {
		t.Fatalf("PortSnapshot: source %q, err %v; want %q", src, err, SourceIterator)
	}
	checkSysctls(t, s, sys, before)
	if b, ok := findLocal(socks, portmodel.TCP, s.boundTo, StateClose); !ok || b.Bucket != portmodel.BucketByBind || !b.Known || b.Inode == 0 {
		t.Errorf("bound-only socket %v: %+v (found %v), want it, bucket by bind, options known, an inode", s.boundTo, b, ok)
	}
	if tw, ok := findLocal(socks, portmodel.TCP, s.timeWait, StateTimeWait); !ok || !tw.TW.Known || !tw.TW.TSRecent || tw.TW.StampSec > sys.NowSec || tw.Bucket != portmodel.BucketByConnect {
		t.Errorf("TIME_WAIT %v: %+v (found %v), want timestamps no later than Now (%d s), bucket by connect", s.timeWait, tw, ok, sys.NowSec)
	}
	if slices.ContainsFunc(socks, func(x portmodel.Socket) bool { return x.Proto != portmodel.TCP }) {
		t.Errorf("udp=false, but UDP sockets:%v", socks)
	}
	_, socks, src, err = s.n.PortSnapshotAll(it, true)
	if _, ok := findLocal(socks, portmodel.UDP, s.udp, StateClose); err != nil || src != SourceIterator || !ok {
		t.Errorf("udp=true: source %q, err %v, UDP socket %v found %v", src, err, s.udp, ok)
	}
}

// TestPortSnapshotFallback: without a reader, or with one that fails, the
// snapshot comes from sock_diag with only what sock_diag proves, says why,
// and agrees with the iterator on every socket both see.
func TestPortSnapshotFallback(t *testing.T) {
	s := newPortScene(t)
	it := newSockIter(t)
	_, viaIter, _, err := s.n.PortSnapshotAll(it, true)
	if err != nil {
		t.Fatal(err)
	}
	before := kernelClock(t)
	sys, socks, src, err := s.n.PortSnapshotAll(nil, true)
	if err != nil || src != "sock_diag: no socket iterator" {
		t.Fatalf("PortSnapshot(nil): source %q, err %v", src, err)
	}
	checkSysctls(t, s, sys, before)
	// Linux 6.7+ dumps the TCP sockets that are only bound; before, only
	// the iterator finds them.
	_, diagBound := findLocal(socks, portmodel.TCP, s.boundTo, StateClose)
	t.Logf("sock_diag shows the bound-only socket: %v", diagBound)
	for _, d := range socks {
		wantBucket := portmodel.BucketUnknown
		if d.Proto == portmodel.TCP && (d.State == StateListen || d.State == StateClose) {
			wantBucket = portmodel.BucketByBind
		}
		if d.Bucket != wantBucket || d.Known || d.TW.Known {
			t.Errorf("sock_diag socket %+v: want bucket %d, options and TIME_WAIT unknown", d, wantBucket)
		}
		if o := d.Local == s.orphan && d.State == StateFinWait2; d.Orphan != o {
			t.Errorf("sock_diag socket %+v: orphan %v, want %v", d, d.Orphan, o)
		}
		// What sock_diag knows, the iterator says alike.
		i := slices.IndexFunc(viaIter, func(x portmodel.Socket) bool {
			return x.Proto == d.Proto && x.Local == d.Local && x.Remote == d.Remote && x.State == d.State
		})
		if i < 0 {
			t.Errorf("sock_diag socket %+v: not in the iterator's snapshot", d)
			continue
		}
		x := viaIter[i]
		if x.Inode != d.Inode || x.UID != d.UID || x.Orphan != d.Orphan || (d.Bucket != portmodel.BucketUnknown && x.Bucket != d.Bucket) {
			t.Errorf("sock_diag %+v\n iterator %+v", d, x)
		}
	}
	if !diagBound && len(viaIter) != len(socks)+1 || diagBound && len(viaIter) != len(socks) {
		t.Errorf("iterator: %d sockets, sock_diag %d (it shows the bound-only one: %v)", len(viaIter), len(socks), diagBound)
	}

	it.Close() // a reader that fails
	_, socks, src, err = s.n.PortSnapshotAll(it, false)
	if err != nil || !strings.HasPrefix(string(src), "sock_diag: the socket iterator failed: ") || !strings.Contains(string(src), "closed") || len(socks) == 0 {
		t.Errorf("PortSnapshot(closed iterator): source %q, err %v, %d sockets; want sock_diag's, saying why", src, err, len(socks))
	}
}

// PortSnapshotAll is PortSnapshot keeping every socket.
func (n *Netns) PortSnapshotAll(it SocketReader, udp bool) (portmodel.Sysctls, []portmodel.Socket, Source, error) {
	sys, socks, src, _, err := n.PortSnapshot(it, udp, nil, 0)
	return sys, socks, src, err
}

// A snapshot keeps what its filter takes, at most max of them, and counts
// the rest it would have kept: memory bounded whatever the netns holds.
func TestPortSnapshotKeepsAtMost(t *testing.T) {
	s := newPortScene(t)
	_, all, _, err := s.n.PortSnapshotAll(nil, false)
	if err != nil || len(all) < 3 {
		t.Fatalf("%d sockets, %v", len(all), err)
	}
	listen := func(sk *portmodel.Socket) bool { return sk.State == StateListen }
	_, kept, _, cut, err := s.n.PortSnapshot(nil, false, listen, 0)
	listeners := 0
	for _, sk := range all {
		if sk.State == StateListen {
			listeners++
		}
	}
	if err != nil || len(kept) != listeners || cut != 0 {
		t.Errorf("listeners only: %d kept, %d cut, %v; want %d and 0", len(kept), cut, err, listeners)
	}
	_, kept, _, cut, err = s.n.PortSnapshot(nil, false, nil, 2)
	if err != nil || len(kept) != 2 || cut != len(all)-2 {
		t.Errorf("at most 2: %d kept, %d cut, %v; want 2 and %d", len(kept), cut, err, len(all)-2)
	}
}
