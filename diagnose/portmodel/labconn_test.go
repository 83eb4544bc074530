package portmodel

import (
	"errors"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// conn is a TCP connection made in the lab: the client fd, the accepted
// server fd and the model's index of the client.
type conn struct {
	c, s, idx int
	local     netip.AddrPort
}

// dial connects a new TCP socket to dst, first bound to bindTo when it is
// valid (port 0 or not; with o.noPort, IP_BIND_ADDRESS_NO_PORT), accepts
// its server side and records the client with the bucket the kernel made
// it: by bind() when it was bound without IP_BIND_ADDRESS_NO_PORT.
func (l *lab) dial(dst netip.AddrPort, bindTo netip.AddrPort, o opts) conn {
	l.t.Helper()
	fam := familyOf(dst.Addr())
	fd := l.socket(fam, unix.SOCK_STREAM, o)
	b := BucketByConnect
	if bindTo.IsValid() {
		if err := unix.Bind(fd, sockaddr(fam, bindTo)); err != nil {
			l.t.Fatalf("bind %v: %v", bindTo, err)
		}
		if !o.noPort {
			b = BucketByBind
		}
	}
	if err := unix.Connect(fd, sockaddr(fam, dst)); err != nil {
		l.t.Fatalf("connect %v: %v", dst, err)
	}
	s, _, err := unix.Accept4(l.serverOf(dst), unix.SOCK_CLOEXEC)
	if err != nil {
		l.t.Fatalf("accept: %v", err)
	}
	l.t.Cleanup(func() { unix.Close(s) })
	idx := l.record(fd, TCP, 1, b, o)
	return conn{c: fd, s: s, idx: idx, local: l.socks[idx].Local}
}

// timeWait turns c into a client-side TIME_WAIT: the client closes first,
// then the server; it waits for the state and records the TIME_WAIT's
// timestamps as the model would read them (the entry time as seen just
// after the state appeared: no earlier than the kernel's own stamp).
func (l *lab) timeWait(c conn) {
	l.t.Helper()
	unix.Close(c.c)
	l.waitTCPState(c.local, 5) // FIN_WAIT2: the server got our FIN
	unix.Close(c.s)
	l.waitTCPState(c.local, stateTimeWait)
	// The server's side leaves LAST_ACK once our last ACK reaches it; until
	// then it may send its FIN again, which refreshes our TIME_WAIT's
	// timestamp (tcp_timewait_state_process) after it was recorded here: a
	// loaded TCG guest showed it, the kernel then refusing reuse the model
	// allowed. Recorded after, the stamp is no earlier than the kernel's.
	l.waitNoPeerState(c.local.Port(), 9) // LAST_ACK
	sec, ms := monotonic()
	sk := &l.socks[c.idx]
	sk.State, sk.Inode = stateTimeWait, 0
	sk.TW = TimeWait{Known: true, TSRecent: l.ts, StampSec: sec, StampMS: ms}
}

// fill connects n sockets to dst and keeps them.
func (l *lab) fill(dst netip.AddrPort, n int) []conn {
	var cs []conn
	for i := 0; i < n; i++ {
		cs = append(cs, l.dial(dst, netip.AddrPort{}, opts{}))
	}
	return cs
}

// countConnects asks the kernel: new sockets connect to dst (from src when
// it is valid, with IP_BIND_ADDRESS_NO_PORT) until one fails; it returns
// the successes and fails the test unless the failure is EADDRNOTAVAIL.
func (l *lab) countConnects(src netip.Addr, dst netip.AddrPort) int {
	l.t.Helper()
	fam := familyOf(dst.Addr())
	for n := 0; n <= l.hi-l.lo+2; n++ {
		fd := l.socket(fam, unix.SOCK_STREAM, opts{noPort: src.IsValid()})
		if src.IsValid() {
			if err := unix.Bind(fd, sockaddr(fam, netip.AddrPortFrom(src, 0))); err != nil {
				l.t.Fatalf("bind %v: %v", src, err)
			}
		}
		err := unix.Connect(fd, sockaddr(fam, dst))
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			return n
		}
		if err != nil {
			l.t.Fatalf("connect %d to %v: %v, want success or EADDRNOTAVAIL", n+1, dst, err)
		}
	}
	l.t.Fatalf("more connects to %v succeeded than the range has ports", dst)
	return -1
}

// countBinds asks the kernel: new sockets of proto bind to local port 0
// (with SO_REUSEADDR when reuse) until one fails with EADDRINUSE.
func (l *lab) countBinds(local netip.Addr, proto Proto, reuse bool) int {
	l.t.Helper()
	typ := unix.SOCK_STREAM
	if proto == UDP {
		typ = unix.SOCK_DGRAM
	}
	fam := familyOf(local)
	for n := 0; n <= l.hi-l.lo+2; n++ {
		fd := l.socket(fam, typ, opts{reuse: reuse})
		err := unix.Bind(fd, sockaddr(fam, netip.AddrPortFrom(local, 0)))
		if errors.Is(err, unix.EADDRINUSE) {
			return n
		}
		if err != nil {
			l.t.Fatalf("bind %d to %v:0: %v, want success or EADDRINUSE", n+1, local, err)
		}
	}
	l.t.Fatalf("more binds to %v:0 succeeded than the range has ports", local)
	return -1
}

// countUDPAutobinds asks the kernel: new UDP sockets connect() to dst
// until one fails with EAGAIN (inet_autobind found no port).
func (l *lab) countUDPAutobinds(dst netip.AddrPort) int {
	l.t.Helper()
	fam := familyOf(dst.Addr())
	for n := 0; n <= l.hi-l.lo+2; n++ {
		fd := l.socket(fam, unix.SOCK_DGRAM, opts{})
		err := unix.Connect(fd, sockaddr(fam, dst))
		if errors.Is(err, unix.EAGAIN) {
			return n
		}
		if err != nil {
			l.t.Fatalf("UDP connect %d to %v: %v, want success or EAGAIN", n+1, dst, err)
		}
	}
	l.t.Fatalf("more UDP connects to %v succeeded than the range has ports", dst)
	return -1
}

// udp makes a UDP socket bound to bindTo (port 0 allowed) and connected to
// dst when dst is valid, and records it.
func (l *lab) udp(bindTo, dst netip.AddrPort, o opts) int {
	l.t.Helper()
	fam := familyOf(bindTo.Addr())
	fd := l.socket(fam, unix.SOCK_DGRAM, o)
	if err := unix.Bind(fd, sockaddr(fam, bindTo)); err != nil {
		l.t.Fatalf("UDP bind %v: %v", bindTo, err)
	}
	state := uint8(7)
	if dst.IsValid() {
		if err := unix.Connect(fd, sockaddr(fam, dst)); err != nil {
			l.t.Fatalf("UDP connect %v: %v", dst, err)
		}
		state = 1
	}
	return l.record(fd, UDP, state, BucketUnknown, o)
}

// settle waits until every recorded TIME_WAIT is old enough for
// tcp_twsk_unique: tcp_tw_reuse_delay ms after it was entered (6.13+), or
// the second after its last timestamp (earlier kernels). The kernel's own
// stamps are no later than the recorded ones, so the kernel agrees.
func (l *lab) settle() {
	l.t.Helper()
	for {
		s := l.sysctls()
		ready := true
		for _, sk := range l.socks {
			if sk.State != stateTimeWait {
				continue
			}
			if s.TWReuseDelayMS >= 0 && s.NowMS <= sk.TW.StampMS+int64(s.TWReuseDelayMS) ||
				s.TWReuseDelayMS < 0 && s.NowSec <= sk.TW.StampSec {
				ready = false
			}
		}
		if ready {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bound makes a TCP socket bound to ap (port 0 allowed) and nothing more.
func (l *lab) bound(ap netip.AddrPort, o opts) int {
	l.t.Helper()
	fam := familyOf(ap.Addr())
	fd := l.socket(fam, unix.SOCK_STREAM, o)
	if err := unix.Bind(fd, sockaddr(fam, ap)); err != nil {
		l.t.Fatalf("bind %v: %v", ap, err)
	}
	return l.record(fd, TCP, stateClose, BucketByBind, o)
}
