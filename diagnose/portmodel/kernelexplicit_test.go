package portmodel

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// conflictCase: sockets made by setup, then a bind() of a new socket to
// local (its port from setup when setup returns one) with o.
type conflictCase struct {
	name  string
	setup func(l *lab) uint16
	proto Proto
	local netip.Addr
	o     opts
}

const port5 = 40005

func at(a string) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(a), port5) }

// twPort makes a client TIME_WAIT from 127.0.0.1 to lo5000 with o and
// returns its port.
func twPort(l *lab, o opts) uint16 {
	c := l.dial(lo5000, lo0, o)
	l.timeWait(c)
	return c.local.Port()
}

var conflictCases = []conflictCase{
	{"listener", func(l *lab) uint16 { l.listen(at("0.0.0.0"), false); return 0 }, TCP, lo4, opts{}},
	{"listener, SO_REUSEADDR both", func(l *lab) uint16 { l.listen(at("0.0.0.0"), true); return 0 }, TCP, lo4, opts{reuse: true}},
	{"bound with SO_REUSEADDR", func(l *lab) uint16 { l.bound(at("127.0.0.1"), opts{reuse: true}); return 0 }, TCP, lo4, opts{}},
	{"bound with SO_REUSEADDR, new too", func(l *lab) uint16 { l.bound(at("127.0.0.1"), opts{reuse: true}); return 0 }, TCP, lo4, opts{reuse: true}},
	{"bound, new SO_REUSEADDR", func(l *lab) uint16 { l.bound(at("127.0.0.1"), opts{}); return 0 }, TCP, lo4, opts{reuse: true}},
	{"bound on another address", func(l *lab) uint16 { l.bound(at(nonLoop.String()), opts{}); return 0 }, TCP, lo4, opts{}},
	{"bound on 0.0.0.0", func(l *lab) uint16 { l.bound(at("0.0.0.0"), opts{}); return 0 }, TCP, nonLoop, opts{}},
	{"v6only :: listener", func(l *lab) uint16 { l.listenOpts(at("::"), opts{v6only: true}); return 0 }, TCP, lo4, opts{}},
	{":: listener", func(l *lab) uint16 { l.listen(at("::"), false); return 0 }, TCP, lo4, opts{}},
	{"SO_REUSEPORT both, same uid", func(l *lab) uint16 { l.listenOpts(at("127.0.0.1"), opts{reuseport: true}); return 0 }, TCP, lo4, opts{reuseport: true}},
	{"TIME_WAIT with SO_REUSEADDR", func(l *lab) uint16 { return twPort(l, opts{reuse: true}) }, TCP, lo4, opts{}},
	{"TIME_WAIT with SO_REUSEADDR, new too", func(l *lab) uint16 { return twPort(l, opts{reuse: true}) }, TCP, lo4, opts{reuse: true}},
	{"TIME_WAIT, new SO_REUSEADDR", func(l *lab) uint16 { return twPort(l, opts{}) }, TCP, lo4, opts{reuse: true}},
	{"connected", func(l *lab) uint16 { return l.fill(lo5000, 1)[0].local.Port() }, TCP, lo4, opts{}},
	{"udp with SO_REUSEADDR, new too", func(l *lab) uint16 { l.udp(at("127.0.0.1"), none, opts{reuse: true}); return 0 }, UDP, lo4, opts{reuse: true}},
	{"udp with SO_REUSEADDR", func(l *lab) uint16 { l.udp(at("127.0.0.1"), none, opts{reuse: true}); return 0 }, UDP, lo4, opts{}},
	{"udp on 0.0.0.0", func(l *lab) uint16 { l.udp(at("0.0.0.0"), none, opts{}); return 0 }, UDP, lo4, opts{}},
}

// tryBind asks the kernel whether a new socket with o binds to local.
func (l *lab) tryBind(proto Proto, local netip.AddrPort, o opts) error {
	typ := unix.SOCK_STREAM
	if proto == UDP {
		typ = unix.SOCK_DGRAM
	}
	fam := familyOf(local.Addr())
	return unix.Bind(l.socket(fam, typ, o), sockaddr(fam, local))
}

// TestBindConflictsMatchKernel: BindConflicts finds conflicts exactly when
// the kernel's bind() to an explicit port fails with EADDRINUSE, and when
// it does, ReuseAddrHelps says whether the same bind with SO_REUSEADDR
// succeeds.
func TestBindConflictsMatchKernel(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range conflictCases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, 40000, 40009)
			port := c.setup(l)
			if port == 0 {
				port = port5
			}
			local := netip.AddrPortFrom(c.local, port)
			conf, unsure := BindConflicts(l.socks, local, c.proto, c.o.reuse, c.o.reuseport, 0)
			err := l.tryBind(c.proto, local, c.o)
			t.Logf("model: conflicts %v, unsure %v; kernel: %v", conf, unsure, err)
			if err != nil && !errors.Is(err, unix.EADDRINUSE) {
				t.Fatalf("bind %v: %v, want nil or EADDRINUSE", local, err)
			}
			if len(unsure) != 0 {
				t.Errorf("model unsure of %v, though it was told every option", unsure)
			}
			if (len(conf) > 0) != (err != nil) {
				t.Fatalf("model conflicts %v, kernel bind: %v", conf, err)
			}
			if err == nil || c.o.reuse {
				return
			}
			helps, known := ReuseAddrHelps(l.socks, conf)
			o := c.o
			o.reuse = true
			err = l.tryBind(c.proto, local, o)
			if !known || helps != (err == nil) {
				t.Errorf("ReuseAddrHelps = %v (known %v), kernel bind with SO_REUSEADDR: %v", helps, known, err)
			}
		})
	}
}

// TestConnectFromPortMatchesKernel: connect() from a socket bound to the
// port of a 4-tuple in use (check_established with twp == NULL): a
// TIME_WAIT with timestamps gives way even with tcp_tw_reuse=0, one
// without does not, nor does an established connection.
func TestConnectFromPortMatchesKernel(t *testing.T) {
	testenv.RequireRoot(t)
	cases := []struct {
		name    string
		sysctls []string
		tw      bool
		dst     netip.AddrPort
	}{
		{"TIME_WAIT, tcp_tw_reuse=0", []string{"net.ipv4.tcp_tw_reuse=0"}, true, lo5000},
		{"TIME_WAIT without timestamps", []string{"net.ipv4.tcp_tw_reuse=1", "net.ipv4.tcp_timestamps=0"}, true, lo5000},
		{"established, same destination", nil, false, lo5000},
		{"established, another destination", nil, false, lo5001},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, 40000, 40009, c.sysctls...)
			cn := l.dial(lo5000, lo0, opts{reuse: true})
			if c.tw {
				l.timeWait(cn)
			}
			pu := ConnectFromPort(l.sysctls(), l.socks, cn.local, c.dst)
			fd := l.socket(unix.AF_INET, unix.SOCK_STREAM, opts{reuse: true})
			if err := unix.Bind(fd, sockaddr(unix.AF_INET, cn.local)); err != nil {
				t.Fatalf("bind %v: %v", cn.local, err)
			}
			err := unix.Connect(fd, sockaddr(unix.AF_INET, c.dst))
			t.Logf("model %+v; kernel: %v", pu, err)
			if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				t.Fatalf("connect: %v, want nil or EADDRNOTAVAIL", err)
			}
			ok := pu.Why == Free || pu.Why == TimeWaitReusable
			if pu.Why == Unsure || ok != (err == nil) {
				t.Errorf("model says %v, kernel connect: %v", pu.Why, err)
			}
		})
	}
}
