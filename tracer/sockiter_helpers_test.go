//go:build linux

package tracer

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"golang.org/x/sys/unix"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func newSockIter(t *testing.T) *SockIter {
	t.Helper()
	testenv.RequireRoot(t)
	it, err := NewSockIter()
	if err != nil {
		t.Fatalf("NewSockIter: %+v", err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

// readIn reads ns's sockets from a thread inside it.
func readIn(t *testing.T, it *SockIter, ns *netns.NS) []portmodel.Socket {
	t.Helper()
	var socks []portmodel.Socket
	err := ns.Do(func() error {
		var err error
		socks, err = it.Read(ns.Inode())
		return err
	})
	if err != nil {
		t.Fatalf("Read(%s): %v", ns, err)
	}
	return socks
}

// scene makes sockets in one netns with raw syscalls, so that each is
// exactly what the test says (bound or not, options), and closes what is
// left at cleanup.
type scene struct {
	t    *testing.T
	ns   *netns.NS
	open map[int]bool
	want map[string]portmodel.Socket // what the iterator must read, by name
}

func newScene(t *testing.T, ns *netns.NS) *scene {
	s := &scene{t: t, ns: ns, open: map[int]bool{}, want: map[string]portmodel.Socket{}}
	t.Cleanup(func() {
		for fd := range s.open {
			unix.Close(fd)
		}
	})
	return s
}

// socket creates an IPv4 socket inside the netns: a socket belongs to the
// netns it was made in for its whole life, so bind, connect and the rest
// then work from any thread.
func (s *scene) socket(typ int, opts ...func(fd int) error) int {
	s.t.Helper()
	var fd int
	err := s.ns.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		for _, o := range opts {
			if err := o(fd); err != nil {
				unix.Close(fd)
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.t.Fatalf("socket in %s: %v", s.ns, err)
	}
	s.open[fd] = true
	return fd
}

func (s *scene) close(fd int) {
	s.t.Helper()
	delete(s.open, fd)
	if err := unix.Close(fd); err != nil {
		s.t.Fatalf("close %d: %v", fd, err)
	}
}

// closeClientFirst closes client c, waits until the server side srv has
// its FIN (CLOSE_WAIT), then closes srv: c alone ends in TIME_WAIT. Closed
// back to back, the two FINs can cross on a slow machine (a TCG guest beside
// busy loops did it): a simultaneous close, both sides in TIME_WAIT.
func (s *scene) closeClientFirst(c, srv int) {
	s.t.Helper()
	s.close(c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := unix.GetsockoptTCPInfo(srv, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			s.t.Fatalf("TCP_INFO of %d: %v", srv, err)
		}
		if info.State == tcpCloseWait {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the server side is in state %d, not CLOSE_WAIT, 30 s after the client closed", info.State)
		}
		time.Sleep(time.Millisecond)
	}
	s.close(srv)
}

func sockopt(opt int) func(int) error {
	return func(fd int) error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1) }
}

func bindToDevice(dev string) func(int) error {
	return func(fd int) error { return unix.BindToDevice(fd, dev) }
}

// bind0 binds fd to 127.0.0.1 port 0 (the kernel picks the port, by bind()).
func (s *scene) bind0(fd int) {
	s.t.Helper()
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback.As4()}); err != nil {
		s.t.Fatalf("bind: %v", err)
	}
}

func (s *scene) listen(opts ...func(int) error) int {
	s.t.Helper()
	fd := s.socket(unix.SOCK_STREAM, opts...)
	s.bind0(fd)
	if err := unix.Listen(fd, 16); err != nil {
		s.t.Fatalf("listen: %v", err)
	}
	return fd
}

// connect connects fd to to; on loopback the handshake is done when it
// returns.
func (s *scene) connect(fd int, to netip.AddrPort) {
	s.t.Helper()
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}); err != nil {
		s.t.Fatalf("connect to %v: %v", to, err)
	}
}

func (s *scene) accept(l int) int {
	s.t.Helper()
	fd, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
	if err != nil {
		s.t.Fatalf("accept: %v", err)
	}
	s.open[fd] = true
	return fd
}

func sockName(t *testing.T, fd int, peer bool) netip.AddrPort {
	t.Helper()
	get := unix.Getsockname
	if peer {
		get = unix.Getpeername
	}
	sa, err := get(fd)
	if err != nil {
		t.Fatalf("getsockname/getpeername %d: %v", fd, err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		t.Fatalf("fd %d: address %T, want IPv4", fd, sa)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
}

func inode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// expect records what the iterator must read of one socket.
func (s *scene) expect(name string, w portmodel.Socket) {
	if _, dup := s.want[name]; dup {
		s.t.Fatalf("two sockets named %q", name)
	}
	s.want[name] = w
}

// full is what the iterator must say of a socket the test holds by fd:
// its addresses and inode as the fd shows them, its options known (and as
// set...), no orphan, no TIME_WAIT.
func full(t *testing.T, fd int, proto portmodel.Proto, state uint8, b portmodel.Bucket, set ...func(*portmodel.Socket)) portmodel.Socket {
	t.Helper()
	s := portmodel.Socket{Proto: proto, State: state, Local: sockName(t, fd, false), Bucket: b, Known: true, Inode: inode(t, fd)}
	if sa, err := unix.Getpeername(fd); err == nil {
		in4 := sa.(*unix.SockaddrInet4)
		s.Remote = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
	}
	for _, f := range set {
		f(&s)
	}
	return s
}

// find returns the sockets with this protocol and these addresses.
func find(socks []portmodel.Socket, proto portmodel.Proto, local, remote netip.AddrPort) []portmodel.Socket {
	var got []portmodel.Socket
	for _, s := range socks {
		if s.Proto == proto && s.Local == local && s.Remote == remote {
			got = append(got, s)
		}
	}
	return got
}

// waitRead reads ns until cond holds of what it read, for as long as a
// loaded machine may need for loopback packets and timers to run.
func waitRead(t *testing.T, it *SockIter, ns *netns.NS, what string, cond func([]portmodel.Socket) bool) []portmodel.Socket {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		socks := readIn(t, it, ns)
		if cond(socks) {
			return socks
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s; last read:%s", what, fmtSockets(socks))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fmtSockets(socks []portmodel.Socket) string {
	var b strings.Builder
	for _, s := range socks {
		fmt.Fprintf(&b, "\n  %+v", s)
	}
	return b.String()
}

// monotonic is the kernel's clock as the model reads it: the seconds of
// ktime_get_seconds (tw_ts_recent_stamp's clock, CLOCK_MONOTONIC_COARSE)
// and the ms of tcp_clock_ms (tw_entry_stamp's).
func monotonic(t *testing.T) (sec, ms int64) {
	t.Helper()
	sec, ms, err := portmodel.KernelClock()
	if err != nil {
		t.Fatal(err)
	}
	return sec, ms
}

// ssLines runs ss with args inside ns and returns one key per socket:
// "STATE local peer ino" (ino 0 where ss shows none).
func ssLines(t *testing.T, ns *netns.NS, args ...string) map[string]int {
	t.Helper()
	path := testenv.Program(t, "ss", "iproute2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ss %v: %v\n%s", args, err, out.Bytes())
	}
	keys := map[string]int{}
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		ino := "0"
		for _, x := range f[5:] {
			if v, ok := strings.CutPrefix(x, "ino:"); ok {
				ino = v
			}
		}
		keys[fmt.Sprintf("%s %s %s %s", f[0], f[3], f[4], ino)]++
	}
	return keys
}

// ssKey is how ss -tanHe / -uanHe prints s.
func ssKey(s portmodel.Socket) string {
	state := map[uint8]string{
		1: "ESTAB", 2: "SYN-SENT", 3: "SYN-RECV", 4: "FIN-WAIT-1", 5: "FIN-WAIT-2",
		6: "TIME-WAIT", 7: "UNCONN", 8: "CLOSE-WAIT", 9: "LAST-ACK", 10: "LISTEN",
		11: "CLOSING", 12: "SYN-RECV",
	}[s.State]
	remote := "0.0.0.0:*"
	if s.Remote.IsValid() {
		remote = s.Remote.String()
	}
	return fmt.Sprintf("%s %s %s %d", state, s.Local, remote, s.Inode)
}

// socket6 creates an IPv6 TCP socket inside the netns (dual-stack).
func (s *scene) socket6() int {
	s.t.Helper()
	var fd int
	err := s.ns.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		s.t.Fatalf("socket6 in %s: %v", s.ns, err)
	}
	s.open[fd] = true
	return fd
}

func sockName6(t *testing.T, fd int) netip.AddrPort {
	t.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in6 := sa.(*unix.SockaddrInet6)
	return netip.AddrPortFrom(netip.AddrFrom16(in6.Addr), uint16(in6.Port))
}
