package decode

import "strconv"

// Small tables for the socket fields. Values are Linux ABI; a value not in a
// table decodes as "unknown:N", never as a guess.

var familyNames = map[uint16]string{
	0:  "unspec",
	1:  "unix",
	2:  "inet",
	10: "inet6",
	16: "netlink",
	17: "packet",
	40: "vsock",
	44: "xdp",
}

var sockTypeNames = map[uint16]string{
	1:  "stream",
	2:  "dgram",
	3:  "raw",
	4:  "rdm",
	5:  "seqpacket",
	6:  "dccp",
	10: "packet",
}

var protocolNames = map[uint16]string{
	1:   "icmp",
	6:   "tcp",
	17:  "udp",
	33:  "dccp",
	58:  "icmpv6",
	132: "sctp",
	136: "udplite",
	262: "mptcp",
}

func lookup(m map[uint16]string, v uint16) string {
	if s, ok := m[v]; ok {
		return s
	}
	return "unknown:" + strconv.Itoa(int(v))
}

// FamilyName returns "inet", "inet6", "unix", ... or "unknown:N".
func FamilyName(f uint16) string { return lookup(familyNames, f) }

// SockTypeName returns "stream", "dgram", ... or "unknown:N".
func SockTypeName(t uint16) string { return lookup(sockTypeNames, t) }

// ProtocolName returns "tcp", "udp", ... or "unknown:N".
func ProtocolName(p uint16) string { return lookup(protocolNames, p) }
