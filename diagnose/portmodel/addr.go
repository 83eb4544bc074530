package portmodel

import "net/netip"

// addrsOverlap follows inet_rcv_saddr_equal(sk, sk2, match_wildcard=true)
// (net/ipv4/inet_connection_sock.c): whether a new socket bound to local
// (an IPv6 socket when local is IPv6; new sockets are taken without
// IPV6_V6ONLY, the default of net.ipv6.bindv6only) and sk2 want the same
// address. Addresses are unmapped: a v6 socket on a v4-mapped address is
// taken as IPv4, as ipv6_rcv_saddr_equal treats two mapped addresses.
func addrsOverlap(local netip.Addr, sk2 Socket) bool {
	a2 := sk2.Local.Addr().Unmap()
	local = local.Unmap()
	if local.Is4() {
		// ipv4_rcv_saddr_equal(sk->sk_rcv_saddr, sk2->sk_rcv_saddr,
		// ipv6_only_sock(sk2), true, true)
		// inet6_bind sets sk_ipv6only on a socket bound to a v6 address
		// that is neither :: nor v4-mapped (net/ipv6/af_inet6.c
		// __inet6_bind), so no IPv4 socket meets it.
		switch {
		case sk2.V6Only, a2.Is6() && !a2.IsUnspecified():
			return false
		}
		return local == a2 || local.IsUnspecified() || a2.IsUnspecified()
	}
	// ipv6_rcv_saddr_equal (net/ipv4/inet_connection_sock.c). sk1 is v6,
	// not mapped (local is IPv6), not v6only.
	any1 := local.IsUnspecified()
	mapped2 := a2.Is4()
	any2 := !mapped2 && a2.IsUnspecified()
	switch {
	case any1 && any2:
		return true
	case any2: // && !(sk2_ipv6only && addr_type == IPV6_ADDR_MAPPED): sk1 is not mapped
		return true
	case any1: // && !(sk1_ipv6only && ...): sk1 is not v6only
		return true
	}
	return !mapped2 && local == a2
}

// devsOverlap follows the bound-device test of inet_bind_conflict and
// udp_lib_lport_inuse: two sockets compete for a port unless both are bound
// to devices and the devices differ. dev is the new socket's.
func devsOverlap(dev int, sk2 Socket) bool {
	return dev == 0 || sk2.BoundDev == 0 || dev == sk2.BoundDev
}
