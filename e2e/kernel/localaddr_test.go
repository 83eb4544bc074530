package kernel

import (
	"errors"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"golang.org/x/sys/unix"
)

// A socket bound to a local address before connect() or bind() fails: the
// event carries that address, all of it. connect() reports the socket's own
// binding (read from the socket by the BPF program: its IPv4 copy once took
// only the first byte, so 127.0.0.5 read as 127.0.0.0); bind() reports the
// address it asked for. A v4-mapped address on an AF_INET6 socket is shown
// as the IPv4 address. The calls are this test's own, on loopback only:
// connect() to a loopback port nothing listens on (ECONNREFUSED, hence
// --errno all), bind() on a socket already bound (EINVAL).
func TestLocalAddressBeforeCall(t *testing.T) {
	p := eaddrtest.StartTrace(t, "--errno", "all", "--pid", strconv.Itoa(os.Getpid()))
	for _, tc := range []struct {
		name       string
		family     int
		bound      string // the socket's address before the call
		remote     string // connect's destination
		second     string // bind's second address
		wantLocal  string // "local"."ip" in the event
		wantFamily string // "socket"."family"
	}{
		{"connect v4", unix.AF_INET, "127.0.0.5", "127.0.0.1", "", "127.0.0.5", "inet"},
		{"connect v6", unix.AF_INET6, "::1", "::1", "", "::1", "inet6"},
		{"connect v4-mapped", unix.AF_INET6, "::ffff:127.0.0.7", "::ffff:127.0.0.1", "", "127.0.0.7", "inet6"},
		{"bind v4", unix.AF_INET, "127.0.0.5", "", "127.0.0.6", "127.0.0.6", "inet"},
		{"bind v6", unix.AF_INET6, "::1", "", "::1", "::1", "inet6"},
		{"bind v4-mapped", unix.AF_INET6, "::ffff:127.0.0.5", "", "::ffff:127.0.0.7", "127.0.0.7", "inet6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := unix.Socket(tc.family, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			// An explicit port: one the kernel picked (port 0) is released
			// again when the refused connect() closes the socket, and the
			// event, read at the syscall's exit, rightly shows port 0.
			port := closedPortOn(t, tc.bound)
			if err := unix.Bind(fd, sockaddr(t, tc.bound, port)); err != nil {
				t.Fatalf("bind %s port %d: %v", tc.bound, port, err)
			}
			n := len(p.ForPID(os.Getpid(), 0, 0))
			call, wantPort := "connect", port
			if tc.remote != "" {
				err = unix.Connect(fd, sockaddr(t, tc.remote, closedPortOn(t, tc.remote)))
				if !errors.Is(err, unix.ECONNREFUSED) {
					t.Fatalf("connect from %s to a closed port: %v, want ECONNREFUSED", tc.bound, err)
				}
			} else {
				call = "bind"
				if err := unix.Bind(fd, sockaddr(t, tc.second, wantPort)); !errors.Is(err, unix.EINVAL) {
					t.Fatalf("second bind to %s: %v, want EINVAL", tc.second, err)
				}
			}
			evs := p.ForPID(os.Getpid(), n+1, 5*time.Second)
			if len(evs) != n+1 {
				t.Fatalf("%d new events for the %s failure, want 1", len(evs)-n, call)
			}
			ev := evs[n]
			if ev.Syscall != call || ev.Socket.Family != tc.wantFamily {
				t.Errorf("event %s on %s, want %s on %s", ev.Syscall, ev.Socket.Family, call, tc.wantFamily)
			}
			if ev.Local == nil || ev.Local.IP != tc.wantLocal || ev.Local.Port != wantPort {
				t.Errorf("local %+v, want %s port %d", ev.Local, tc.wantLocal, wantPort)
			}
		})
	}
}

func sockaddr(t *testing.T, ip string, port int) unix.Sockaddr {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	if a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4(), Port: port}
	}
	return &unix.SockaddrInet6{Addr: a.As16(), Port: port}
}

func boundPort(t *testing.T, fd int) int {
	t.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	t.Fatalf("getsockname: %T", sa)
	return 0
}

// closedPortOn returns a TCP port of ip (host netns, loopback) that nothing
// listens on: it was bound and released again.
func closedPortOn(t *testing.T, ip string) int {
	t.Helper()
	a := netip.MustParseAddr(ip)
	family := unix.AF_INET6
	if a.Is4() {
		family = unix.AF_INET
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, sockaddr(t, ip, 0)); err != nil {
		t.Fatal(err)
	}
	return boundPort(t, fd)
}
