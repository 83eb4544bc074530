package portmodel

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// lab is a throwaway netns in which a kernel test makes real sockets and
// writes down, in socks, what the model is to be told of them.
type lab struct {
	t         *testing.T
	ns        *netns.NS
	lo, hi    int
	reserved  []Span
	socks     []Socket
	listeners map[netip.AddrPort]int // listener fds by address
	ts        bool                   // net.ipv4.tcp_timestamps on
}

// nonLoop is the address the lab puts on a veth, not a loopback one.
var nonLoop = netip.MustParseAddr("10.77.0.1")

// newLab makes the netns, sets ip_local_port_range to lo-hi and the other
// sysctls given as name=value, puts nonLoop on a veth and listens on
// 0.0.0.0:5000, 0.0.0.0:5001 and [::1]:5000 (outside the range).
func newLab(t *testing.T, lo, hi int, sysctls ...string) *lab {
	t.Helper()
	ns := testns.New(t)
	l := &lab{t: t, ns: ns, lo: lo, hi: hi, listeners: map[netip.AddrPort]int{}, ts: true}
	l.sysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi))
	for _, kv := range sysctls {
		name, val, _ := strings.Cut(kv, "=")
		if n, ok := strings.CutPrefix(name, "?"); ok {
			// set only where the kernel has it (tcp_tw_reuse_delay: 6.13+)
			if _, err := os.Stat("/proc/sys/" + strings.ReplaceAll(n, ".", "/")); err != nil {
				continue
			}
			name = n
		}
		l.sysctl(name, val)
		switch name {
		case "net.ipv4.tcp_timestamps":
			l.ts = val != "0"
		case "net.ipv4.ip_local_reserved_ports":
			l.reserved = parseSpans(t, val)
		}
	}
	ip := testenv.Program(t, "ip", "iproute2")
	for _, args := range [][]string{
		{"link", "add", "pm0", "type", "veth", "peer", "name", "pm1"},
		{"addr", "add", nonLoop.String() + "/24", "dev", "pm0"},
		{"link", "set", "pm0", "up"}, {"link", "set", "pm1", "up"},
	} {
		cmd := exec.Command(ip, args...)
		if err := ns.Start(cmd); err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
	}
	for _, a := range []string{"0.0.0.0:5000", "0.0.0.0:5001", "[::1]:5000"} {
		l.listen(netip.MustParseAddrPort(a), false)
	}
	return l
}

func parseSpans(t *testing.T, v string) []Span {
	var out []Span
	for _, f := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(f, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := lo, error(nil)
		if ok {
			hi, err2 = strconv.Atoi(b)
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("reserved ports %q", v)
		}
		out = append(out, Span{lo, hi})
	}
	return out
}

func (l *lab) sysctl(name, val string) {
	l.t.Helper()
	if err := l.ns.SetSysctl(name, val); err != nil {
		l.t.Fatal(err)
	}
}

// sysctls is what the model is told of the netns, Now read last.
func (l *lab) sysctls() Sysctls {
	s := Sysctls{Lo: l.lo, Hi: l.hi, Reserved: l.reserved, TWReuseDelayMS: -1}
	v, err := l.ns.Sysctl("net.ipv4.tcp_tw_reuse")
	if err != nil {
		l.t.Fatal(err)
	}
	s.TWReuse, _ = strconv.Atoi(v)
	if v, err := l.ns.Sysctl("net.ipv4.tcp_tw_reuse_delay"); err == nil {
		s.TWReuseDelayMS, _ = strconv.Atoi(v)
	} else if !errors.Is(err, os.ErrNotExist) {
		l.t.Fatal(err)
	}
	s.NowSec, s.NowMS = monotonic()
	return s
}

// monotonic is KernelClock, which cannot fail on Linux: ktime_get_seconds and
// tcp_clock_ms.
func monotonic() (sec, ms int64) {
	sec, ms, err := KernelClock()
	if err != nil {
		panic(err)
	}
	return sec, ms
}

// sockaddr converts ap for the family fam.
func sockaddr(fam int, ap netip.AddrPort) unix.Sockaddr {
	if fam == unix.AF_INET6 {
		a := unix.SockaddrInet6{Port: int(ap.Port())}
		a.Addr = ap.Addr().As16()
		return &a
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// opts are the options a lab socket is made with.
type opts struct {
	reuse, reuseport, noPort, v6only bool
}

// socket makes a socket in the netns with o set, closed at cleanup.
func (l *lab) socket(fam, typ int, o opts) int {
	l.t.Helper()
	var fd int
	err := l.ns.Do(func() error {
		var err error
		fd, err = unix.Socket(fam, typ|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		l.t.Fatalf("socket: %v", err)
	}
	l.t.Cleanup(func() { unix.Close(fd) })
	set := func(level, opt int, on bool) {
		if on {
			if err := unix.SetsockoptInt(fd, level, opt, 1); err != nil {
				l.t.Fatalf("setsockopt %d: %v", opt, err)
			}
		}
	}
	set(unix.SOL_SOCKET, unix.SO_REUSEADDR, o.reuse)
	set(unix.SOL_SOCKET, unix.SO_REUSEPORT, o.reuseport)
	set(unix.SOL_IP, unix.IP_BIND_ADDRESS_NO_PORT, o.noPort)
	if fam == unix.AF_INET6 {
		set(unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, o.v6only)
	}
	return fd
}

// record writes down for the model the socket fd, now in state.
func (l *lab) record(fd int, proto Proto, state uint8, b Bucket, o opts) int {
	l.t.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		l.t.Fatal(err)
	}
	sk := Socket{Proto: proto, State: state, Local: addrPortOf(sa), Bucket: b,
		Reuse: o.reuse, ReusePort: o.reuseport, Known: true, V6Only: o.v6only, UID: 0, Inode: 1}
	if pa, err := unix.Getpeername(fd); err == nil {
		sk.Remote = addrPortOf(pa)
	}
	l.socks = append(l.socks, sk)
	return len(l.socks) - 1
}

// listen makes a TCP listener on ap.
func (l *lab) listen(ap netip.AddrPort, reuse bool) int {
	l.t.Helper()
	return l.listenOpts(ap, opts{reuse: reuse})
}

// listenOpts makes a TCP listener on ap with o.
func (l *lab) listenOpts(ap netip.AddrPort, o opts) int {
	l.t.Helper()
	fd := l.socket(familyOf(ap.Addr()), unix.SOCK_STREAM, o)
	if err := unix.Bind(fd, sockaddr(familyOf(ap.Addr()), ap)); err != nil {
		l.t.Fatalf("bind %v: %v", ap, err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		l.t.Fatalf("listen %v: %v", ap, err)
	}
	l.listeners[ap] = fd
	l.record(fd, TCP, stateListen, BucketByBind, o)
	return fd
}

// serverOf is the listener fd that serves dst.
func (l *lab) serverOf(dst netip.AddrPort) int {
	if fd, ok := l.listeners[dst]; ok {
		return fd
	}
	wild := netip.AddrPortFrom(netip.IPv4Unspecified(), dst.Port())
	if fd, ok := l.listeners[wild]; ok && dst.Addr().Is4() {
		return fd
	}
	l.t.Fatalf("no listener for %v", dst)
	return -1
}

// waitTCPState waits until the netns shows a TCP socket on local in state
// (a /proc/net/tcp{,6} "st" number); the test's deadline bounds it.
func (l *lab) waitTCPState(local netip.AddrPort, state int) {
	l.t.Helper()
	l.waitProc(1, local.Port(), state, true)
}

// waitNoPeerState waits until no socket whose remote port is port is in
// state (the server side of a connection, seen from its peer's port).
func (l *lab) waitNoPeerState(port uint16, state int) {
	l.t.Helper()
	l.waitProc(2, port, state, false)
}

// waitProc polls /proc/net/tcp and tcp6 of the netns until a socket whose
// address in field (1 local, 2 remote) has port, in state, is there (want)
// or is in neither (!want).
func (l *lab) waitProc(field int, port uint16, state int, want bool) {
	l.t.Helper()
	for {
		found := false
		err := l.ns.Do(func() error {
			for _, f := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
				ok, err := procHas(f, field, port, state)
				if err != nil {
					return err
				}
				found = found || ok
			}
			return nil
		})
		if err != nil {
			l.t.Fatal(err)
		}
		if found == want {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// procHas says whether the /proc/net/tcp-format file f has a socket whose
// address in field (1 local, 2 remote) has port port, in state.
func procHas(f string, field int, port uint16, state int) (bool, error) {
	fh, err := os.Open(f)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[0] == "sl" {
			continue
		}
		_, p, _ := strings.Cut(fs[field], ":")
		pv, _ := strconv.ParseUint(p, 16, 16)
		st, _ := strconv.ParseUint(fs[3], 16, 8)
		if uint16(pv) == port && int(st) == state {
			return true, nil
		}
	}
	return false, sc.Err()
}
