package sockscene

import "net/netip"

// close-wait-leak: the peer closed (its FIN arrived), the holder never
// closes: the clients sit in CLOSE_WAIT and keep their ports. The server
// sides the test closed are orphans (FIN_WAIT2, no process).
func buildCloseWait(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	l := r.listen(server, false)
	clients := r.dialN(rangeN, func(int) netip.AddrPort { return server }, nil)
	for _, fd := range r.acceptN(l, rangeN) {
		r.closeFD(fd)
	}
	r.waitTCPState("clients in CLOSE_WAIT", clients, tcpCloseWait)
	r.hand(s, "clients", clients)
	r.hand(s, "server", []int{l})
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
}

// fin-wait2-orphans: the clients closed, the peer never closes (its
// sockets stay open in a "peer" holder): the clients are orphans in
// FIN_WAIT2 that keep their ports. tcp_fin_timeout is raised so that they
// stay full sockets: at 60 s or less an orphan reaching FIN_WAIT2 becomes
// at once a TIME_WAIT socket in the FIN_WAIT2 substate (tcp_rcv_state_process).
func buildFinWait2(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.sysctl("net.ipv4.tcp_fin_timeout", "600")
	l := r.listen(server, false)
	clients := r.dialN(rangeN, func(int) netip.AddrPort { return server }, nil)
	servers := r.acceptN(l, rangeN)
	r.hand(s, "peer", append([]int{l}, servers...))
	for _, fd := range clients {
		r.closeFD(fd)
	}
	r.waitSS("tcp", "FIN-WAIT-2", rangeN)
	r.victim(s, call{sys: "connect", proto: "tcp", remote: server})
	r.truth(s)
}
