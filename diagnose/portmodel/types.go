// Package portmodel is the kernel's own rules for handing out a local port,
// written down so that eaddr can say, from a list of sockets and the netns's
// sysctls, whether a connect() or a port-0 bind() can still find a port, and
// which sockets are in the way. The diagnosis of a failure and `eaddr check`
// both use it; "exhausted" and "not exhausted" come only from here.
//
// The rules are those of the kernels in eaddr's matrix (6.1, 6.12, this
// machine's): __inet_hash_connect and __inet_check_established/tcp_twsk_unique
// for connect(), inet_csk_get_port/inet_csk_find_open_port and
// inet_csk_bind_conflict for bind(), udp_lib_get_port for UDP. Each rule
// names the function it follows.
//
// Entry points: Connect (a connect() that picks its port), ConnectFromPort
// (one from a bound port), BindPort0 (bind() to port 0, TCP or UDP),
// UDPAutobind (a UDP connect()/sendto() from an unbound socket),
// BindConflicts and ReuseAddrHelps (bind() to an explicit port), and
// Tried/TriedBySome/NeverTried (the range as the kernel walks it, with the
// even-count cut of span.go). A Result counts the calls sure to succeed
// (Free, TWReusable), those that may (SomeCalls) and the ports the model
// cannot judge from what it was given (Unsure, e.g. a bind bucket that
// sock_diag cannot show); Exhausted is true only when none is left.
// Not modelled: SO_REUSEPORT groups, IP_LOCAL_PORT_RANGE, VRF/l3mdev,
// SO_BINDTODEVICE on the new socket, net.ipv4.ip_autobind_reuse.
//
// The kernel tests (kernel*_test.go) make each configuration with real
// sockets in a throwaway netns and ask the kernel how many calls succeed.
package portmodel

import "net/netip"

// Proto is the transport protocol a socket or a call is of.
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

// Bucket says how the kernel's bind bucket for a socket's port (net, port,
// l3mdev) was made. A bucket made by bind() (a listener, a socket bound to a
// port or to port 0 without IP_BIND_ADDRESS_NO_PORT, their orphans and
// TIME_WAIT children) has fastreuse or fastreuseport >= 0, and
// __inet_hash_connect skips its port for every destination. A bucket made by
// connect() has both at -1: its port stays usable toward other destinations.
type Bucket uint8

const (
	BucketUnknown   Bucket = iota // not seen (sock_diag does not show it)
	BucketByBind                  // fastreuse >= 0 || fastreuseport >= 0
	BucketByConnect               // fastreuse == -1 && fastreuseport == -1
)

// Socket is one socket of a netns, with what the rules need to know of it.
type Socket struct {
	Proto  Proto
	State  uint8          // TCP state number (include/net/tcp_states.h); UDP: 7 unconnected, 1 connected
	Local  netip.AddrPort // v4-mapped addresses unmapped
	Remote netip.AddrPort // zero when not connected
	Bucket Bucket         // TCP only
	// The socket's own options, when known (the BPF socket iterator reads
	// them; sock_diag does not show them).
	Reuse, ReusePort bool // SO_REUSEADDR, SO_REUSEPORT
	Known            bool // Reuse, ReusePort and BoundDev were read
	BoundDev         int  // SO_BINDTODEVICE ifindex; 0 none
	UID              uint32
	// V6Only is IPV6_V6ONLY (sock_diag's INET_DIAG_SKV6ONLY): a v6
	// socket bound to :: that has it set does not hold the port for IPv4.
	V6Only bool
	Inode  uint64 // 0 for TIME_WAIT and request sockets
	Orphan bool   // no file holds it any more (FIN_WAIT*, LAST_ACK, CLOSING)
	// TIME_WAIT only: whether the connection used timestamps and the
	// seconds (ktime_get_seconds: CLOCK_MONOTONIC_COARSE) when the last one was
	// seen: tcp_twsk_unique reuses a TIME_WAIT port only with timestamps on.
	TW TimeWait
}

// TimeWait is what tcp_twsk_unique reads of a TIME_WAIT socket.
type TimeWait struct {
	Known    bool  // read by the iterator; false: sock_diag, unknown
	TSRecent bool  // tw_ts_recent_stamp != 0
	StampSec int64 // tw_ts_recent_stamp, seconds of CLOCK_MONOTONIC_COARSE
	StampMS  int64 // 6.13+: tw_entry_stamp in ms (tcp_tw_reuse_delay), 0 when absent
}

// Span is an inclusive range of ports.
type Span struct{ Lo, Hi int }

// Sysctls are the settings of the netns that the rules read.
type Sysctls struct {
	Lo, Hi   int    // net.ipv4.ip_local_port_range
	Reserved []Span // net.ipv4.ip_local_reserved_ports
	TWReuse  int    // net.ipv4.tcp_tw_reuse: 0, 1, or 2 (loopback only, the default)
	// net.ipv4.tcp_tw_reuse_delay in ms, where the kernel has it (6.13+);
	// -1 where it does not, and the rule is "one second since the last
	// timestamp".
	TWReuseDelayMS int
	// Now is the kernel's clock when the sockets were read, as KernelClock
	// reads it: ktime_get_seconds (CLOCK_MONOTONIC_COARSE) and tcp_clock_ms
	// (CLOCK_MONOTONIC in ms).
	NowSec int64
	NowMS  int64
}
