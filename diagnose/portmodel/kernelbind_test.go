package portmodel

import (
	"net/netip"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

var (
	any4 = netip.IPv4Unspecified()
	any6 = netip.IPv6Unspecified()
	lo4  = netip.MustParseAddr("127.0.0.1")
	lo6  = netip.MustParseAddr("::1")
)

// bindCase is one configuration of sockets and one kind of port-0 call:
// bind(local:0) of proto with SO_REUSEADDR when reuse, or (autobind) a
// UDP connect() to lo5000 from a socket never bound.
type bindCase struct {
	name     string
	lo, hi   int
	sysctls  []string
	setup    func(l *lab)
	proto    Proto
	autobind bool
	local    netip.Addr
	reuse    bool
	want     int // the sure count the case is built to leave
	some     int // and the SomeCalls count
}

func connects3(l *lab) { l.fill(lo5000, 3) }

func udp3(l *lab) {
	for i := 0; i < 3; i++ {
		l.udp(lo0, lo5001, opts{})
	}
}

var bindCases = []bindCase{
	{name: "tcp empty", setup: func(*lab) {}, proto: TCP, local: lo4, want: 10},
	{name: "tcp connect()s, same address", setup: connects3, proto: TCP, local: lo4, want: 7},
	{name: "tcp connect()s, other address", setup: connects3, proto: TCP, local: nonLoop, want: 10},
	{name: "tcp connect()s, 0.0.0.0", setup: connects3, proto: TCP, local: any4, want: 7},
	{name: "tcp connect()s, ::", setup: connects3, proto: TCP, local: any6, want: 7},
	{name: "tcp connect()s, ::1", setup: connects3, proto: TCP, local: lo6, want: 10},
	{name: "tcp SO_REUSEADDR both sides, not listening", setup: func(l *lab) {
		l.bound(lo0, opts{reuse: true})
		l.bound(lo0, opts{reuse: true})
	}, proto: TCP, local: lo4, reuse: true, want: 8},
	{name: "tcp TIME_WAIT", setup: func(l *lab) { fillTW(l, lo5000, none, 3) }, proto: TCP, local: lo4, want: 7},
	{name: "tcp v6only :: listener, v4 bind", setup: func(l *lab) {
		l.listenOpts(netip.MustParseAddrPort("[::]:40002"), opts{v6only: true})
	}, proto: TCP, local: lo4, want: 10},
	{name: "tcp v6only :: listener, v6 bind", setup: func(l *lab) {
		l.listenOpts(netip.MustParseAddrPort("[::]:40002"), opts{v6only: true})
	}, proto: TCP, local: lo6, want: 9},
	{name: "tcp [::1] listener, 0.0.0.0 bind", setup: func(l *lab) {
		l.listen(netip.MustParseAddrPort("[::1]:40002"), false)
	}, proto: TCP, local: any4, want: 10}, // a v6 address makes the socket v6only
	{name: "tcp [::1] listener, 127.0.0.1 bind", setup: func(l *lab) {
		l.listen(netip.MustParseAddrPort("[::1]:40002"), false)
	}, proto: TCP, local: lo4, want: 10},
	{name: "tcp odd count of 3", lo: 40000, hi: 40002, setup: func(*lab) {}, proto: TCP, local: lo4, want: 2},
	{name: "tcp odd count of 5", lo: 40000, hi: 40004, setup: func(*lab) {}, proto: TCP, local: lo4, want: 4, some: 1},
	{name: "tcp odd count of 5, SO_REUSEADDR halves", lo: 40000, hi: 40004, setup: func(*lab) {}, proto: TCP, local: lo4, reuse: true, want: 4},
	{name: "tcp reserved ports", sysctls: []string{"net.ipv4.ip_local_reserved_ports=40001-40003"},
		setup: func(*lab) {}, proto: TCP, local: lo4, want: 7},
	{name: "udp connected sockets", setup: udp3, proto: UDP, local: lo4, want: 7},
	{name: "udp SO_REUSEADDR on the old side only", setup: func(l *lab) {
		for _, p := range []uint16{40001, 40003, 40005} { // port 0 could share one
			l.udp(netip.AddrPortFrom(lo4, p), none, opts{reuse: true})
		}
	}, proto: UDP, local: lo4, want: 7},
	{name: "udp odd count of 3", lo: 40000, hi: 40002, setup: func(*lab) {}, proto: UDP, local: lo4, want: 3},
	{name: "udp autobind, connected sockets elsewhere", setup: udp3, proto: UDP, autobind: true, local: any4, want: 7},
	{name: "udp autobind, a [::1] socket", setup: func(l *lab) {
		l.udp(netip.MustParseAddrPort("[::1]:40004"), none, opts{})
	}, proto: UDP, autobind: true, local: any4, want: 10},
	{name: "udp autobind, a v6only :: socket", setup: func(l *lab) {
		l.udp(netip.MustParseAddrPort("[::]:40004"), none, opts{v6only: true})
	}, proto: UDP, autobind: true, local: any4, want: 10},
	{name: "udp autobind, exhausted", lo: 40000, hi: 40002, setup: func(l *lab) {
		for i := 0; i < 3; i++ {
			l.udp(lo0, none, opts{})
		}
	}, proto: UDP, autobind: true, local: any4, want: 0},
}

// TestPortModelBindMatchesKernel: for each configuration, the model's count
// of port-0 binds (TCP, UDP) or UDP autobinds that must, and may, succeed
// brackets what the kernel does when asked until it fails.
func TestPortModelBindMatchesKernel(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range bindCases {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := c.lo, c.hi
			if lo == 0 {
				lo, hi = 40000, 40009
			}
			l := newLab(t, lo, hi, c.sysctls...)
			c.setup(l)
			s := l.sysctls()
			var r Result
			var got int
			if c.autobind {
				r = UDPAutobind(s, l.socks, c.local)
				got = l.countUDPAutobinds(lo5000)
			} else {
				r = BindPort0(s, l.socks, c.local, c.proto, c.reuse)
				got = l.countBinds(c.local, c.proto, c.reuse)
			}
			sure := r.Free + r.TWReusable
			t.Logf("model %+v; kernel: %d", r, got)
			if r.Unsure != 0 {
				t.Errorf("model unsure of %d ports, though it was told every option", r.Unsure)
			}
			if got < sure || got > sure+r.SomeCalls {
				t.Errorf("kernel gave %d ports, model says %d sure and %d more possible", got, sure, r.SomeCalls)
			}
			if r.Exhausted != (got == 0) {
				t.Errorf("model Exhausted=%v, kernel gave %d", r.Exhausted, got)
			}
			if sure != c.want {
				t.Errorf("the case is meant to leave %d, the model says %d", c.want, sure)
			}
			if r.SomeCalls != c.some {
				t.Errorf("the case is meant to leave %d ports only some calls try, the model says %d", c.some, r.SomeCalls)
			}
		})
	}
}
