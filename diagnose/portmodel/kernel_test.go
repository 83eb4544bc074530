package portmodel

import (
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

var (
	lo5000  = netip.MustParseAddrPort("127.0.0.1:5000")
	lo5001  = netip.MustParseAddrPort("127.0.0.1:5001")
	nl5000  = netip.AddrPortFrom(nonLoop, 5000)
	v6_5000 = netip.MustParseAddrPort("[::1]:5000")
	lo0     = netip.MustParseAddrPort("127.0.0.1:0")
	none    netip.AddrPort
)

// connectCase is one configuration of sockets, and the count of connect()s
// to dst the case is built to leave (Free + TWReusable), so that a case that
// stops making what it means to is noticed.
type connectCase struct {
	name    string
	lo, hi  int
	sysctls []string
	setup   func(l *lab)
	dst     netip.AddrPort
	want    int
	some    int // and the SomeCalls count
	// needsDelay: the case needs net.ipv4.tcp_tw_reuse_delay (6.13+) and
	// at most that long (60 s) between the TIME_WAITs and the count.
	needsDelay bool
}

// fillTW makes n connections to dst (bound to bindTo when valid), then
// turns each into a client-side TIME_WAIT (all made first: a connect()
// could otherwise take over an earlier TIME_WAIT).
func fillTW(l *lab, dst, bindTo netip.AddrPort, n int) {
	var cs []conn
	for i := 0; i < n; i++ {
		cs = append(cs, l.dial(dst, bindTo, opts{}))
	}
	for _, c := range cs {
		l.timeWait(c)
	}
}

var connectCases = []connectCase{
	{name: "empty", setup: func(l *lab) {}, dst: lo5000, want: 10},
	{name: "connected to another destination", setup: func(l *lab) { l.fill(lo5001, 10) }, dst: lo5000, want: 10},
	{name: "connected to the same destination", setup: func(l *lab) { l.fill(lo5000, 4) }, dst: lo5000, want: 6},
	{name: "bound to port 0, connected elsewhere", setup: func(l *lab) {
		for i := 0; i < 3; i++ {
			l.dial(lo5001, lo0, opts{})
		}
	}, dst: lo5000, want: 7},
	{name: "IP_BIND_ADDRESS_NO_PORT, connected elsewhere", setup: func(l *lab) {
		for i := 0; i < 3; i++ {
			l.dial(lo5001, lo0, opts{noPort: true})
		}
	}, dst: lo5000, want: 10},
	{name: "bound only, on another address", setup: func(l *lab) {
		l.bound(netip.AddrPortFrom(nonLoop, 0), opts{})
		l.bound(netip.AddrPortFrom(nonLoop, 0), opts{})
	}, dst: lo5000, want: 8},
	{name: "listeners in range, v4 and v6", setup: func(l *lab) {
		l.listen(netip.MustParseAddrPort("0.0.0.0:40003"), false)
		l.listen(netip.MustParseAddrPort("[::1]:40004"), false)
	}, dst: lo5000, want: 8},
	{name: "TIME_WAIT, tcp_tw_reuse=1", sysctls: []string{"net.ipv4.tcp_tw_reuse=1", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, lo5000, none, 5); l.settle() }, dst: lo5000, want: 10},
	{name: "TIME_WAIT younger than tcp_tw_reuse_delay", sysctls: []string{"net.ipv4.tcp_tw_reuse=1", "net.ipv4.tcp_tw_reuse_delay=60000"},
		needsDelay: true, setup: func(l *lab) { fillTW(l, lo5000, none, 5) }, dst: lo5000, want: 5},
	{name: "TIME_WAIT, tcp_tw_reuse=0", sysctls: []string{"net.ipv4.tcp_tw_reuse=0", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, lo5000, none, 5); l.settle() }, dst: lo5000, want: 5},
	{name: "TIME_WAIT without timestamps", sysctls: []string{"net.ipv4.tcp_tw_reuse=1", "net.ipv4.tcp_timestamps=0", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, lo5000, none, 5); l.settle() }, dst: lo5000, want: 5},
	{name: "TIME_WAIT on loopback, tcp_tw_reuse=2", sysctls: []string{"net.ipv4.tcp_tw_reuse=2", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, lo5000, none, 5); l.settle() }, dst: lo5000, want: 10},
	{name: "TIME_WAIT on a veth address, tcp_tw_reuse=2", sysctls: []string{"net.ipv4.tcp_tw_reuse=2", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, nl5000, none, 5); l.settle() }, dst: nl5000, want: 5},
	{name: "TIME_WAIT on a veth address, tcp_tw_reuse=1", sysctls: []string{"net.ipv4.tcp_tw_reuse=1", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, nl5000, none, 5); l.settle() }, dst: nl5000, want: 10},
	{name: "TIME_WAIT of bound sockets, another destination", sysctls: []string{"net.ipv4.tcp_tw_reuse=1", "?net.ipv4.tcp_tw_reuse_delay=1"},
		setup: func(l *lab) { fillTW(l, lo5001, lo0, 3); l.settle() }, dst: lo5000, want: 7},
	{name: "orphan in FIN_WAIT2 of a bound socket", setup: func(l *lab) {
		c := l.dial(lo5001, lo0, opts{})
		unix.Close(c.c)
		l.waitTCPState(c.local, 5)
		sk := &l.socks[c.idx]
		sk.State, sk.Orphan, sk.Inode = 5, true, 0
	}, dst: lo5000, want: 9},
	{name: "odd count of 3", lo: 40000, hi: 40002, setup: func(l *lab) {}, dst: lo5000, want: 2},
	{name: "odd count of 11", lo: 40000, hi: 40010, setup: func(l *lab) {}, dst: lo5000, want: 10, some: 1},
	{name: "reserved ports", sysctls: []string{"net.ipv4.ip_local_reserved_ports=40002,40005-40006"},
		setup: func(l *lab) {}, dst: lo5000, want: 7},
	{name: "IPv6, with a v4 listener in range", setup: func(l *lab) {
		l.listen(netip.MustParseAddrPort("127.0.0.1:40001"), false)
		l.fill(v6_5000, 3)
	}, dst: v6_5000, want: 6},
	{name: "exhausted", lo: 40000, hi: 40003, setup: func(l *lab) { l.fill(lo5000, 4) }, dst: lo5000, want: 0},
}

// TestPortModelMatchesKernel: for each configuration of real sockets in a
// throwaway netns, the model's count of connect()s to dst that must
// succeed, and may succeed, brackets what the kernel does when asked until
// it fails, and Exhausted is true exactly when the kernel gives none.
func TestPortModelMatchesKernel(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range connectCases {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := c.lo, c.hi
			if lo == 0 {
				lo, hi = 40000, 40009
			}
			if c.needsDelay {
				if _, err := os.Stat("/proc/sys/net/ipv4/tcp_tw_reuse_delay"); err != nil {
					t.Skip("this kernel has no net.ipv4.tcp_tw_reuse_delay (6.13+): a TIME_WAIT cannot be made surely too young")
				}
			}
			l := newLab(t, lo, hi, c.sysctls...)
			_, start := monotonic()
			c.setup(l)
			s := l.sysctls()
			r := Connect(s, l.socks, c.dst.Addr(), c.dst)
			got := l.countConnects(netip.Addr{}, c.dst)
			sure := r.Free + r.TWReusable
			if _, end := monotonic(); c.needsDelay && end-start >= 60000 {
				t.Skipf("the case took %d ms, more than tcp_tw_reuse_delay: it cannot judge", end-start)
			}
			t.Logf("model %+v; kernel: %d connects", r, got)
			if r.Unsure != 0 {
				t.Errorf("model unsure of %d ports, though it was told every bucket", r.Unsure)
			}
			if got < sure || got > sure+r.SomeCalls {
				t.Errorf("kernel made %d connects, model says %d sure and %d more possible", got, sure, r.SomeCalls)
			}
			if r.Exhausted != (got == 0) {
				t.Errorf("model Exhausted=%v, kernel made %d connects", r.Exhausted, got)
			}
			if sure != c.want {
				t.Errorf("the case is meant to leave %d connects, the model says %d", c.want, sure)
			}
			if r.SomeCalls != c.some {
				t.Errorf("the case is meant to leave %d ports only some calls try, the model says %d", c.some, r.SomeCalls)
			}
		})
	}
}
