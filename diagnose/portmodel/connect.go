package portmodel

import "net/netip"

// Connect says which ports of ip_local_port_range a TCP connect() from an
// unbound socket (no port, no SO_BINDTODEVICE, no IP_LOCAL_PORT_RANGE) to
// dst can get, src being the source address the route gives it (or the
// address it was bound to with IP_BIND_ADDRESS_NO_PORT). It follows
// __inet_hash_connect (net/ipv4/inet_hashtables.c; inet6_hash_connect uses
// the same function): for each port tried, skip it if reserved; skip it if
// its bind bucket was made by bind(); else take it unless
// __inet_check_established finds its 4-tuple in use (with a TIME_WAIT
// there, tcp_twsk_unique decides).
func Connect(s Sysctls, socks []Socket, src netip.Addr, dst netip.AddrPort) Result {
	src = src.Unmap()
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	byPort := tcpByPort(socks)
	return tally(s, []scan{scanOf(s.Lo, s.Hi)}, s.Lo, s.Hi, func(p int) verdict {
		return connectPort(s, socks, byPort[p], netip.AddrPortFrom(src, uint16(p)), dst)
	})
}

// ConnectFromPort says whether connect() to dst succeeds from a socket
// already bound to local (an explicit port, or port 0 without
// IP_BIND_ADDRESS_NO_PORT): __inet_hash_connect then only calls
// __inet_check_established with twp == NULL. The bind bucket does not
// matter: the socket is in it already. Why is Free, FourTuple,
// TimeWaitReusable or Unsure.
func ConnectFromPort(s Sysctls, socks []Socket, local, dst netip.AddrPort) PortUse {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	idx := tcpByPort(socks)[int(local.Port())]
	v := fourTuple(s, socks, idx, local, dst, true)
	return PortUse{Port: int(local.Port()), Why: v.why, Sockets: v.socks, Note: v.note}
}

// tcpByPort indexes the TCP sockets by local port.
func tcpByPort(socks []Socket) map[int][]int {
	m := map[int][]int{}
	for i, sk := range socks {
		if sk.Proto == TCP {
			m[int(sk.Local.Port())] = append(m[int(sk.Local.Port())], i)
		}
	}
	return m
}

// connectPort judges one port for Connect: the bind bucket test of
// __inet_hash_connect, then the 4-tuple.
func connectPort(s Sysctls, socks []Socket, idx []int, local, dst netip.AddrPort) verdict {
	var held, unknown []int
	for _, i := range idx {
		sk := socks[i]
		// A listener or a bound-only socket made or joined the bucket
		// through inet_csk_get_port, and inet_csk_update_fastreuse set
		// fastreuse >= 0: whatever the reader said, the bucket is bind's.
		switch {
		case sk.Bucket == BucketByBind || sk.State == stateListen || sk.State == stateClose:
			held = append(held, i)
		case sk.Bucket == BucketUnknown:
			unknown = append(unknown, i)
		}
	}
	if len(held) > 0 {
		return verdict{why: HeldForAll, socks: held}
	}
	v := fourTuple(s, socks, idx, local, dst, false)
	if len(unknown) > 0 && v.why != FourTuple {
		return verdict{why: Unsure, socks: unknown,
			note: "how the port's bind bucket was made is not known (sock_diag does not show it); if by bind(), no connect() can have the port"}
	}
	return v
}

// fourTuple follows __inet_check_established (net/ipv4/inet_hashtables.c,
// __inet6_check_established in net/ipv6/inet6_hashtables.c): a socket of
// the established hash with the new socket's 4-tuple blocks the port,
// unless it is a TIME_WAIT that tcp_twsk_unique lets go. inet_match also
// wants the bound devices to agree: the new socket is unbound, so an
// existing socket bound to a device does not match it.
func fourTuple(s Sysctls, socks []Socket, idx []int, local, dst netip.AddrPort, bound bool) verdict {
	for _, i := range idx {
		sk := socks[i]
		if sk.State == stateListen || sk.State == stateClose || sk.BoundDev != 0 {
			continue
		}
		if sk.Local.Addr().Unmap() != local.Addr() || sk.Remote.Addr().Unmap() != dst.Addr() ||
			sk.Remote.Port() != dst.Port() {
			continue
		}
		if sk.State != stateTimeWait {
			if bound && sk.State == 5 && sk.Inode == 0 && !sk.Orphan {
				// a TIME_WAIT of substate FIN_WAIT2: twp == NULL reuses it
				// when it has timestamps.
				v := twReuse(s, sk, true)
				v.socks = []int{i}
				return v
			}
			return verdict{why: FourTuple, socks: []int{i}}
		}
		v := twReuse(s, sk, bound)
		v.socks = []int{i}
		return v
	}
	return verdict{why: Free}
}
