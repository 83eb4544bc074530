package tracer

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A refused connect's source port, blocking or not, is the one the kernel
// chose and released (FlagReleased), in a netns whose ip_local_port_range
// is the single port 40000; a port bind() chose is the socket's, still held
// after the failure: no FlagReleased. Every event carries the socket's
// cookie, which is SO_COOKIE's. The same with --netns set to that netns.
func TestReleasedSourcePort(t *testing.T) {
	opts := Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.ECONNREFUSED)}, Async: true}
	all := newTracer(t, opts) // first: it skips (or fails under EADDR_REQUIRE_BPF) without BPF
	ns := onePortNS(t)
	opts.NetNS = uint32(ns.Inode())
	inNS := newTracer(t, opts)
	for _, tc := range []struct {
		name     string
		flags    int // socket type flags
		bind     int // port bound before connect, 0 for none
		port     int // the event's local port
		released bool
	}{
		{"blocking", 0, 0, 40000, true},
		{"blocking, bound", 0, 41000, 41000, false},
		{"non-blocking", unix.SOCK_NONBLOCK, 0, 40000, true},
		{"non-blocking, bound", unix.SOCK_NONBLOCK, 41001, 41001, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cookie := refuse(t, ns, tc.flags, tc.bind)
			for name, tr := range map[string]*Tracer{"all": all, "--netns": inNS} {
				ev := expect(t, tr, tc.name+" refused connect", SysConnect, unix.ECONNREFUSED)
				checkReleased(t, name, ev, tc.port, tc.released, tc.flags != 0, cookie)
			}
		})
	}
}

// onePortNS is a netns whose ip_local_port_range is the single port 40000.
func onePortNS(t *testing.T) *netns.NS {
	t.Helper()
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "40000 40000"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// refuse connects a TCP socket (socket type flags, bound first to port
// bind unless 0) to 127.0.0.1:9 in ns, where nothing listens, and returns
// its cookie: refused, or in progress when non-blocking.
func refuse(t *testing.T, ns *netns.NS, flags, bind int) (cookie uint64) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|flags, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if bind != 0 {
			if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: bind}); err != nil {
				return err
			}
		}
		err = unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: 9})
		if want := map[int]error{0: unix.ECONNREFUSED, unix.SOCK_NONBLOCK: unix.EINPROGRESS}[flags]; !errors.Is(err, want) {
			t.Errorf("connect: %v, want %v", err, want)
		}
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return cookie
}

func checkReleased(t *testing.T, name string, ev RawEvent, port int, released, async bool, cookie uint64) {
	t.Helper()
	if int(ev.LocalPort) != port || [4]byte(ev.LocalAddr[:4]) != [4]byte{127, 0, 0, 1} || (ev.Flags&FlagReleased != 0) != released {
		t.Errorf("%s: local % x port %d flags %#x, want 127.0.0.1 port %d released %v", name, ev.LocalAddr[:4], ev.LocalPort, ev.Flags, port, released)
	}
	if ev.SockCookie == 0 || ev.SockCookie != cookie {
		t.Errorf("%s: cookie %d, SO_COOKIE says %d", name, ev.SockCookie, cookie)
	}
	if (ev.Flags&FlagAsync != 0) != async {
		t.Errorf("%s: flags %#x: async is for the non-blocking connect", name, ev.Flags)
	}
}
