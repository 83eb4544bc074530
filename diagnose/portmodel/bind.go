package portmodel

import "net/netip"

// BindPort0 says which ports a bind() to local port 0 can get (or listen()
// on an unbound socket, or connect() from a socket bound to port 0 without
// IP_BIND_ADDRESS_NO_PORT: all go through inet_csk_get_port). For TCP it
// follows inet_csk_find_open_port (net/ipv4/inet_connection_sock.c): with
// SO_REUSEADDR (reuse) and at least 4 ports it scans the lower half of the
// range first, then the upper half, each half with its own even-count
// cut; a port is skipped when inet_csk_bind_conflict, called with
// relax = false and reuseport_ok = false, finds any socket of the port's
// bucket on an overlapping address: during the scan neither side's
// SO_REUSEADDR nor SO_REUSEPORT helps, and a connect()'s bucket counts as
// much as a bind()'s. (ip_autobind_reuse=1 would relax this: not modelled.)
// For UDP it follows udp_lib_get_port, see UDPPort0. The new socket is
// taken as unbound to a device.
func BindPort0(s Sysctls, socks []Socket, local netip.Addr, proto Proto, reuse bool) Result {
	if proto == UDP {
		return UDPPort0(s, socks, local, reuse)
	}
	byPort := tcpByPort(socks)
	return tally(s, port0Scans(s.Lo, s.Hi, reuse), s.Lo, s.Hi, func(p int) verdict {
		var in []int
		for _, i := range byPort[p] {
			if socks[i].State != stateNewSynRecv && addrsOverlap(local, socks[i]) {
				in = append(in, i)
			}
		}
		if len(in) > 0 {
			return verdict{why: HeldForAll, socks: in}
		}
		return verdict{why: Free}
	})
}

// port0Scans is the scans inet_csk_find_open_port makes: the halves when
// attempt_half (sk_reuse == SK_CAN_REUSE, and high - low >= 4 with high
// one past the range).
func port0Scans(lo, hi int, reuse bool) []scan {
	n := hi - lo + 1
	if !reuse || n < 4 {
		return []scan{scanOf(lo, hi)}
	}
	half := lo + ((n >> 2) << 1)
	return []scan{scanOf(lo, half-1), scanOf(half, hi)}
}

// BindConflicts lists the sockets that make bind() to local (an explicit
// port) fail with EADDRINUSE for a new TCP or UDP socket with the given
// SO_REUSEADDR, SO_REUSEPORT and uid (not bound to a device), and apart
// the sockets the model cannot judge because their options were not read.
// TCP follows inet_csk_get_port with a port, through
// inet_csk_bind_conflict(relax = true, reuseport_ok = true) and
// inet_bind_conflict; UDP follows udp_lib_lport_inuse.
func BindConflicts(socks []Socket, local netip.AddrPort, proto Proto, reuse, reuseport bool, uid uint32) (conflicts, unsure []int) {
	for i, sk2 := range socks {
		if sk2.Proto != proto || sk2.Local.Port() != local.Port() || !addrsOverlap(local.Addr(), sk2) ||
			(proto == TCP && sk2.State == stateNewSynRecv) {
			continue
		}
		switch {
		case !reuse && !reuseport:
			conflicts = append(conflicts, i) // nothing on the new side can share
		case !sk2.Known:
			unsure = append(unsure, i)
		case proto == TCP && tcpConflict(sk2, reuse, reuseport, uid):
			conflicts = append(conflicts, i)
		case proto == UDP && udpConflict(sk2, reuse, reuseport, uid):
			conflicts = append(conflicts, i)
		}
	}
	return conflicts, unsure
}

// tcpConflict is inet_bind_conflict with relax and reuseport_ok true and a
// new socket without a reuseport group: SO_REUSEADDR on both sides shares
// the port unless sk2 listens; else SO_REUSEPORT on both sides shares it
// when sk2 is TIME_WAIT or has the same uid.
func tcpConflict(sk2 Socket, reuse, reuseport bool, uid uint32) bool {
	if reuse && sk2.Reuse && sk2.State != stateListen {
		return false
	}
	return !(reuseport && sk2.ReusePort && (sk2.State == stateTimeWait || sk2.UID == uid))
}

// udpConflict is udp_lib_lport_inuse: SO_REUSEADDR on both sides shares
// the port (listening means nothing for UDP); else SO_REUSEPORT on both
// sides with the same uid.
func udpConflict(sk2 Socket, reuse, reuseport bool, uid uint32) bool {
	if reuse && sk2.Reuse {
		return false
	}
	return !(reuseport && sk2.ReusePort && sk2.UID == uid)
}

// ReuseAddrHelps says whether setting SO_REUSEADDR on the new TCP socket
// would let its bind() succeed despite the conflicts BindConflicts found
// without it: only when every one of them has SO_REUSEADDR itself and does
// not listen (inet_bind_conflict; a TIME_WAIT keeps the option of the
// socket it came from). known is false when some conflicting socket's
// options were not read, and helps is then false too.
func ReuseAddrHelps(socks []Socket, conflicts []int) (helps, known bool) {
	helps = true
	for _, i := range conflicts {
		sk2 := socks[i]
		if !sk2.Known {
			return false, false
		}
		if !sk2.Reuse || sk2.State == stateListen {
			helps = false
		}
	}
	return helps, true
}
