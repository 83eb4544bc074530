package explain

import "github.com/eaddr/eaddr/decode"

// The protocols the catalog's meanings tell apart (ErrnoInfo.Proto).
const (
	protoTCP  = "tcp"  // TCP, and MPTCP, which binds and connects its TCP subflow
	protoUDP  = "udp"  // UDP and UDP-Lite: both take ports with udp_lib_get_port
	protoUnix = "unix" // AF_UNIX sockets of any type
)

// IP protocol numbers (include/uapi/linux/in.h).
const (
	ipprotoTCP     = 6
	ipprotoUDP     = 17
	ipprotoUDPLite = 136
	ipprotoMPTCP   = 262
)

// protoOf is the protocol of ev's socket as the catalog tells them apart,
// or "" when it is unknown (the fd's socket could not be read) or another.
func protoOf(ev *decode.Event) string {
	if !ev.HasSocket {
		return ""
	}
	switch ev.Family {
	case decode.AFUnix:
		return protoUnix
	case decode.AFInet, decode.AFInet6:
		switch ev.Protocol {
		case ipprotoTCP, ipprotoMPTCP:
			return protoTCP
		case ipprotoUDP, ipprotoUDPLite:
			return protoUDP
		}
	}
	return ""
}
