package portmodel

import "fmt"

// TCP states (include/net/tcp_states.h) the rules look at.
const (
	stateSynRecv    = 3
	stateTimeWait   = 6
	stateClose      = 7
	stateListen     = 10
	stateNewSynRecv = 12
)

// loopbackIfindex is LOOPBACK_IFINDEX: "lo" is ifindex 1 in every netns.
const loopbackIfindex = 1

// twReuse follows tcp_twsk_unique (net/ipv4/tcp_ipv4.c) for a TIME_WAIT
// socket tw on the 4-tuple of a new connect(). bound says the new socket
// was already bound to its port: __inet_hash_connect then calls
// check_established with twp == NULL, and tcp_twsk_unique reuses any
// TIME_WAIT that has timestamps, whatever tcp_tw_reuse says.
//
// A TIME_WAIT whose substate is FIN_WAIT2 (sock_diag shows it as
// FIN_WAIT2, not TIME_WAIT) gets reuse = 0: callers do not pass those here.
func twReuse(s Sysctls, tw Socket, bound bool) verdict {
	if !tw.TW.Known {
		return verdict{why: Unsure, note: "a TIME_WAIT socket on this 4-tuple; its timestamps were not read"}
	}
	if !tw.TW.TSRecent {
		return verdict{why: FourTuple, note: "TIME_WAIT without TCP timestamps: never reused"}
	}
	if bound {
		return verdict{why: TimeWaitReusable, note: "TIME_WAIT with timestamps, and the port was bound: reused (twp == NULL)"}
	}
	reuse := s.TWReuse
	if reuse == 2 && !twLoopback(tw) {
		reuse = 0
	}
	if reuse == 0 {
		return verdict{why: FourTuple, note: fmt.Sprintf("TIME_WAIT, and net.ipv4.tcp_tw_reuse=%d does not allow it here", s.TWReuse)}
	}
	if s.TWReuseDelayMS >= 0 {
		// 6.13+: time_after32(tcp_clock_ms(), tw_entry_stamp + tcp_tw_reuse_delay)
		if int32(uint32(tw.TW.StampMS)+uint32(s.TWReuseDelayMS)-uint32(s.NowMS)) < 0 {
			return verdict{why: TimeWaitReusable}
		}
		return verdict{why: FourTuple, note: fmt.Sprintf("TIME_WAIT entered less than tcp_tw_reuse_delay=%dms ago", s.TWReuseDelayMS)}
	}
	// up to 6.12: time_after32(ktime_get_seconds(), tw_ts_recent_stamp)
	if int32(uint32(tw.TW.StampSec)-uint32(s.NowSec)) < 0 {
		return verdict{why: TimeWaitReusable}
	}
	return verdict{why: FourTuple, note: "TIME_WAIT whose last timestamp is less than a second old"}
}

// twLoopback is tcp_twsk_unique's test for tcp_tw_reuse=2: the TIME_WAIT
// was bound to "lo", or its local or remote address is a loopback one
// (127/8, ::1, ::ffff:127/104). An address of the netns that is merely
// routed through lo does not count.
func twLoopback(tw Socket) bool {
	return tw.BoundDev == loopbackIfindex ||
		tw.Local.Addr().Unmap().IsLoopback() || tw.Remote.Addr().Unmap().IsLoopback()
}
