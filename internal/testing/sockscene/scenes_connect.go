package sockscene

import (
	"net/netip"
)

// The ephemeral range of the scenes: ten ports, so they fill fast. The
// servers listen outside it.
const (
	rangeLo = 40000
	rangeHi = 40009
	rangeN  = rangeHi - rangeLo + 1
	srvPort = 8080
)

// server is the destination most scenes connect to.
var server = ap(loopback, srvPort)

// pool fills n local ports with ESTABLISHED connections to dest (a new
// listener): the clients go to a "clients" holder, the listener and the
// accepted sides to a "server" holder, with extra listeners if any.
func (r *rig) pool(s *Scene, n int, dest netip.AddrPort, extra ...int) {
	r.t.Helper()
	l := r.listen(dest, false)
	clients := r.dialN(n, func(int) netip.AddrPort { return dest }, nil)
	servers := r.acceptN(l, n)
	r.hand(s, "clients", clients)
	r.hand(s, "server", append(append([]int{l}, extra...), servers...))
}

// established: a pool that never reuses its connections holds every port
// of the range ESTABLISHED to one destination; a connect to it fails, one
// to another destination still gets a port (the 4-tuple differs).
func buildEstablished(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	other := ap(loopback, srvPort+1)
	l2 := r.listen(other, false)
	r.pool(s, rangeN, server, l2)
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
	s.OtherDest = other
	s.OtherDestOK, _ = r.probe(call{sys: "connect", proto: "tcp", remote: other})
}

// bind-before-connect: sockets bind(0) without IP_BIND_ADDRESS_NO_PORT,
// then connect to several destinations: their ports' bind buckets are made
// by bind, so connect() skips them for every destination, a new one too.
func buildBindBeforeConnect(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	dests := []netip.AddrPort{ap(loopback, srvPort), ap(loopback, srvPort+1), ap(loopback, srvPort+2)}
	var ls []int
	for _, d := range dests {
		ls = append(ls, r.listen(d, false))
	}
	clients := r.dialN(rangeN, func(i int) netip.AddrPort { return dests[i%len(dests)] },
		func(int) netip.AddrPort { return ap(anyV4, 0) })
	var servers []int
	for i, l := range ls {
		n := 0
		for j := range rangeN {
			if j%len(dests) == i {
				n++
			}
		}
		servers = append(servers, r.acceptN(l, n)...)
	}
	fresh := ap(loopback, srvPort+3)
	lf := r.listen(fresh, false)
	r.hand(s, "clients", clients)
	r.hand(s, "server", append(append(ls, lf), servers...))
	r.victim(s, call{sys: "connect", proto: "tcp", remote: fresh})
	r.truth(s)
}

// bound-only: sockets bound to port 0 and never connected hold the range.
func buildBoundOnly(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	l := r.listen(server, false)
	r.hand(s, "clients", r.bindN(rangeN, "tcp", ap(anyV4, 0)))
	r.hand(s, "server", []int{l})
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
	s.Notes = append(s.Notes, "ss (iproute2 6.1) does not list TCP sockets that are bound and "+
		"not connected: Truth shows none of them; Holders[0].Locals has their ports")
}

// listener-in-range: a listener holds one port of the range and the other
// N-1 are ESTABLISHED: the listener's port is never handed to connect().
func buildListenerInRange(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	inRange := r.listen(ap(anyV4, rangeLo+5), false)
	r.hand(s, "listener", []int{inRange})
	r.pool(s, rangeN-1, server)
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
}

// reserved: ip_local_reserved_ports leaves two ports of the range, both
// ESTABLISHED.
func buildReserved(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.sysctl("net.ipv4.ip_local_reserved_ports", "40000-40007")
	r.pool(s, 2, server)
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
}
