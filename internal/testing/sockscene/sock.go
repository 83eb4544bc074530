package sockscene

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Addresses the scenes use inside their netns.
var (
	loopback = netip.MustParseAddr("127.0.0.1")
	anyV4    = netip.IPv4Unspecified()
)

// ap is addr:port.
func ap(a netip.Addr, port int) netip.AddrPort { return netip.AddrPortFrom(a, uint16(port)) }

// sockaddr converts ap for the socket calls.
func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// errnoOf is the errno in err, 0 if err is nil or holds none.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// rawSocket creates a blocking close-on-exec socket inside the netns (only
// socket() needs to run there: the socket keeps its netns for life). With
// reuse it sets SO_REUSEADDR. The test holds it until it is closed or
// handed to a holder.
func (r *rig) rawSocket(proto string, v6, reuse bool) (int, error) {
	af, typ := unix.AF_INET, unix.SOCK_STREAM
	if v6 {
		af = unix.AF_INET6
	}
	if proto == "udp" {
		typ = unix.SOCK_DGRAM
	}
	fd := -1
	err := r.ns.Do(func() error {
		var err error
		fd, err = unix.Socket(af, typ|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	r.mu.Lock()
	r.fds[fd] = true
	r.mu.Unlock()
	if reuse {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			r.closeFD(fd)
			return -1, fmt.Errorf("SO_REUSEADDR: %w", err)
		}
	}
	return fd, nil
}

// socket is rawSocket failing the test on error.
func (r *rig) socket(proto string, v6, reuse bool) int {
	r.t.Helper()
	fd, err := r.rawSocket(proto, v6, reuse)
	r.must(err, "socket")
	return fd
}

// forget drops fd from the test's list (it was closed or handed on).
func (r *rig) forget(fd int) {
	r.mu.Lock()
	delete(r.fds, fd)
	r.mu.Unlock()
}

// closeFD closes a socket of the test.
func (r *rig) closeFD(fd int) {
	r.forget(fd)
	unix.Close(fd)
}

// closeRST closes a socket with SO_LINGER 0: a connected TCP socket is
// reset, so it leaves no TIME_WAIT behind.
func (r *rig) closeRST(fd int) {
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	r.closeFD(fd)
}

// listen makes a TCP listener on a, with or without SO_REUSEADDR (Go's
// net.Listen always sets it, which is why this is raw).
func (r *rig) listen(a netip.AddrPort, reuse bool) int {
	r.t.Helper()
	fd := r.socket("tcp", a.Addr().Is6(), reuse)
	r.must(unix.Bind(fd, sockaddr(a)), "bind listener "+a.String())
	r.must(unix.Listen(fd, 128), "listen "+a.String())
	return fd
}

// dialN makes n TCP connections to the destinations to(i), each from a
// socket bound first to bind(i) when bind is not nil.
func (r *rig) dialN(n int, to func(int) netip.AddrPort, bind func(int) netip.AddrPort) []int {
	r.t.Helper()
	fds := make([]int, 0, n)
	for i := 0; i < n; i++ {
		d := to(i)
		fd := r.socket("tcp", d.Addr().Is6(), false)
		if bind != nil {
			r.must(unix.Bind(fd, sockaddr(bind(i))), fmt.Sprintf("bind %d of %d to %s", i+1, n, bind(i)))
		}
		r.must(unix.Connect(fd, sockaddr(d)), fmt.Sprintf("connect %d of %d to %s", i+1, n, d))
		fds = append(fds, fd)
	}
	return fds
}

// bindN binds n sockets of proto to a (port 0: the kernel picks one).
func (r *rig) bindN(n int, proto string, a netip.AddrPort) []int {
	r.t.Helper()
	fds := make([]int, 0, n)
	for i := 0; i < n; i++ {
		fd := r.socket(proto, a.Addr().Is6(), false)
		r.must(unix.Bind(fd, sockaddr(a)), fmt.Sprintf("bind %d of %d to %s", i+1, n, a))
		fds = append(fds, fd)
	}
	return fds
}

// acceptN accepts n connections on listener l.
func (r *rig) acceptN(l, n int) []int {
	r.t.Helper()
	fds := make([]int, 0, n)
	for i := 0; i < n; i++ {
		fd, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
		r.must(err, fmt.Sprintf("accept %d of %d", i+1, n))
		r.mu.Lock()
		r.fds[fd] = true
		r.mu.Unlock()
		fds = append(fds, fd)
	}
	return fds
}

// TCP states (include/net/tcp_states.h) the scenes wait for.
const (
	tcpEstablished = 1
	tcpFinWait2    = 5
	tcpCloseWait   = 8
)

// waitTCPState waits until every socket of fds is in state.
func (r *rig) waitTCPState(what string, fds []int, state uint8) {
	r.t.Helper()
	r.waitFor(what, func() (bool, error) {
		for _, fd := range fds {
			info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				return false, err
			}
			if info.State != state {
				return false, nil
			}
		}
		return true, nil
	})
}

// kernelTCPLines are the kernel log's lines about TCP (orphans, memory,
// time-wait buckets: why a socket may skip a state), or why not read.
func kernelTCPLines() string {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return fmt.Sprintf("(dmesg: %v)", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "TCP") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "none"
	}
	return "\n" + strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// waitSS waits until `ss` shows want sockets in state (as ss names it,
// e.g. "TIME-WAIT") on the local ports of the scene; when it never does, it
// fails with the states ss showed last, its output and the kernel's TCP
// messages.
func (r *rig) waitSS(proto, state string, want int) {
	r.t.Helper()
	var last Truth
	r.waitForSaying(fmt.Sprintf("%d %s sockets", want, state), func() (bool, error) {
		tr, err := r.readSS(proto, false)
		last = tr
		return err == nil && tr.States[state] == want, err
	}, func() string {
		return fmt.Sprintf("ss showed last, on the scene's ports, %v:\n%s\nthe kernel's TCP messages: %s", last.States, last.Raw, kernelTCPLines())
	})
}
