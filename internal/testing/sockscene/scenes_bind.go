package sockscene

import (
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// fourTuplePort is the explicit source port of "four-tuple", outside the
// ephemeral range.
const fourTuplePort = 50000

// four-tuple: a holder's socket bound to port P (SO_REUSEADDR) is
// connected to D; the victim binds P too (SO_REUSEADDR, so the bind itself
// is allowed) and connects to D: the 4-tuple is taken.
func buildFourTuple(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	src := ap(loopback, fourTuplePort)
	r.ports = append(r.ports, fourTuplePort)
	l := r.listen(server, false)
	held := r.socket("tcp", false, true)
	r.must(unix.Bind(held, sockaddr(src)), "bind the held socket")
	r.must(unix.Connect(held, sockaddr(server)), "connect the held socket")
	servers := r.acceptN(l, 1)
	r.hand(s, "clients", []int{held})
	r.hand(s, "server", append([]int{l}, servers...))
	r.victim(s, call{sys: "connect", proto: "tcp", local: src, remote: server, reuse: true})
	r.truth(s)
	if ok, e := r.probe(call{sys: "bind", proto: "tcp", local: src}); !ok {
		s.Notes = append(s.Notes, "without SO_REUSEADDR the victim's bind to "+src.String()+
			" already fails: "+e.Error()+" ("+errName(e)+")")
	}
}

// bind-port0: every port of the range is ESTABLISHED (made by connect);
// bind(0) finds none free.
func buildBindPort0(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.pool(s, rangeN, server)
	r.victim(s, call{sys: "bind", proto: "tcp", local: ap(anyV4, 0)})
	r.truth(s)
}

// bind-in-use-listener: an explicit bind to the port a listener holds
// (neither with SO_REUSEADDR). The fix tried: SO_REUSEADDR on the new
// socket, which does not help against a listener.
func buildBindInUseListener(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	a := ap(anyV4, srvPort)
	r.ports = append(r.ports, srvPort)
	r.hand(s, "listener", []int{r.listen(a, false)})
	r.victim(s, call{sys: "bind", proto: "tcp", local: a})
	r.truth(s)
	s.Fix = "SO_REUSEADDR on the new socket"
	s.FixWorks, s.FixErrno = r.probe(call{sys: "bind", proto: "tcp", local: a, reuse: true})
}

// bind-in-use-timewait: an earlier instance of a server (no SO_REUSEADDR)
// closed its connection first and exited: only its TIME_WAIT holds the
// port. A new bind without SO_REUSEADDR fails. The fix, SO_REUSEADDR on
// the new socket, is tried (a bound socket closed leaves nothing behind):
// it does not help, the TIME_WAIT keeps the earlier socket's flag and
// inet_bind_conflict wants it on both. On a twin netns the earlier
// instance sets it too (s.Twin).
func buildBindInUseTimeWait(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	a := ap(anyV4, srvPort)
	r.ports = append(r.ports, srvPort)
	r.serverTimeWait(a, false)
	r.victim(s, call{sys: "bind", proto: "tcp", local: a})
	r.truth(s)
	s.Fix = "SO_REUSEADDR on the new socket"
	s.FixWorks, s.FixErrno = r.probe(call{sys: "bind", proto: "tcp", local: a, reuse: true})

	twin := newRig(r.t, r.name+" (twin)")
	defer twin.cleanup()
	twin.setRange(rangeLo, rangeHi)
	twin.ports = append(twin.ports, srvPort)
	twin.serverTimeWait(a, true)
	s.Twin = "SO_REUSEADDR on the earlier instance's listener and on the new socket"
	s.TwinOK, s.TwinErrno = twin.probe(call{sys: "bind", proto: "tcp", local: a, reuse: true})
}

// serverTimeWait leaves one TIME_WAIT on the server side of a (a listener
// with or without SO_REUSEADDR that closed its connection first), and
// nothing else: the client and the listener are closed.
func (r *rig) serverTimeWait(a netip.AddrPort, reuse bool) {
	r.t.Helper()
	l := r.listen(a, reuse)
	clients := r.dialN(1, func(int) netip.AddrPort { return server }, nil)
	servers := r.acceptN(l, 1)
	r.closeFD(servers[0])
	r.waitTCPState("client in CLOSE_WAIT", clients, tcpCloseWait)
	r.closeFD(clients[0])
	r.closeFD(l)
	r.waitSS("tcp", "TIME-WAIT", 1)
}

// errName is the errno's symbolic name, e.g. EADDRINUSE.
func errName(e syscall.Errno) string { return unix.ErrnoName(e) }
