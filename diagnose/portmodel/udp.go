package portmodel

import "net/netip"

// UDPAutobind says which ports a UDP socket that was never bound gets when
// connect() or sendto() binds it (inet_autobind: udp_lib_get_port(sk, 0);
// when that fails, connect() returns EAGAIN). The socket's address is
// still the wildcard of its family at that moment (the source address is
// set after the port is chosen), so local is 0.0.0.0 or ::: every UDP
// socket on a port of the range holds that port, whatever its destination.
func UDPAutobind(s Sysctls, socks []Socket, local netip.Addr) Result {
	return UDPPort0(s, socks, local, false)
}

// UDPPort0 says which ports bind() to local port 0 can get for a UDP
// socket (EADDRINUSE when none). It follows udp_lib_get_port
// (net/ipv4/udp.c): every port of ip_local_port_range but the reserved
// ones is tried (no even-count cut); a port is skipped when
// udp_lib_lport_inuse finds a socket of it on an overlapping address,
// unless both have SO_REUSEADDR (reuse) or SO_REUSEPORT with the same uid
// (the new socket is taken without SO_REUSEPORT). A socket whose options
// were not read makes its port Unsure when the new one has SO_REUSEADDR.
func UDPPort0(s Sysctls, socks []Socket, local netip.Addr, reuse bool) Result {
	byPort := map[int][]int{}
	for i, sk := range socks {
		if sk.Proto == UDP {
			byPort[int(sk.Local.Port())] = append(byPort[int(sk.Local.Port())], i)
		}
	}
	return tally(s, nil, s.Lo, s.Hi, func(p int) verdict {
		var in, unknown []int
		for _, i := range byPort[p] {
			sk2 := socks[i]
			switch {
			case !addrsOverlap(local, sk2):
			case reuse && !sk2.Known:
				unknown = append(unknown, i)
			case reuse && sk2.Reuse:
			default:
				in = append(in, i)
			}
		}
		switch {
		case len(in) > 0:
			return verdict{why: HeldForAll, socks: in}
		case len(unknown) > 0:
			return verdict{why: Unsure, socks: unknown, note: "SO_REUSEADDR of a socket on the port not known"}
		}
		return verdict{why: Free}
	})
}
