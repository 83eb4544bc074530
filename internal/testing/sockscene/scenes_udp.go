package sockscene

// udpDest is where the UDP victim connects; nothing needs to listen there.
var udpDest = ap(loopback, 9999)

// udp-exhausted: UDP sockets bound on every port of the range; a connect()
// of an unbound UDP socket has to pick a port (inet_autobind) and fails.
func buildUDPExhausted(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.hand(s, "clients", r.bindN(rangeN, "udp", ap(anyV4, 0)))
	r.victim(s, call{sys: "connect", proto: "udp", remote: udpDest})
	r.truth(s)
}

// udp-bind-port0: the same, with bind(0) as the failing call.
func buildUDPBindPort0(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.hand(s, "clients", r.bindN(rangeN, "udp", ap(anyV4, 0)))
	r.victim(s, call{sys: "bind", proto: "udp", local: ap(anyV4, 0)})
	r.truth(s)
}
