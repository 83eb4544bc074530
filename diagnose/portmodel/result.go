package portmodel

import "fmt"

// Reason says why a port is, or is not, one a new call can have.
type Reason uint8

const (
	// Free: the call can take the port.
	Free Reason = iota
	// Reserved: in net.ipv4.ip_local_reserved_ports; never handed out.
	Reserved
	// NotTried: no call tries the port (the even-count cut, see span.go).
	NotTried
	// SomeCalls: usable, but only some calls try it (the ends of an odd
	// count of ports, see span.go).
	SomeCalls
	// HeldForAll: connect(): the port's bind bucket was made by bind()
	// (fastreuse >= 0 || fastreuseport >= 0), so __inet_hash_connect skips
	// it for every destination. bind(0) and UDP: a socket on the port
	// conflicts with the new one.
	HeldForAll
	// FourTuple: a socket with the same (source, port, destination) is in
	// the established hash and cannot be replaced (__inet_check_established).
	FourTuple
	// TimeWaitReusable: the only socket on the 4-tuple is a TIME_WAIT one
	// that tcp_twsk_unique lets the new connection replace.
	TimeWaitReusable
	// Unsure: the model lacks what it needs to decide (a bind bucket or a
	// TIME_WAIT's timestamps not read, a socket's options unknown).
	Unsure
)

var reasonNames = [...]string{"free", "reserved", "not_tried", "some_calls",
	"held_for_all", "four_tuple", "time_wait_reusable", "unsure"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("unknown:%d", uint8(r))
}

// PortUse is one port that is not simply free, with why and the sockets
// (indexes into the socks given) that make it so.
type PortUse struct {
	Port    int
	Why     Reason
	Sockets []int
	// Note says, for Unsure, what was missing.
	Note string
}

// Result is what the model says of the ports a call can get.
//
// Free and TWReusable count the calls that are sure to succeed one after
// another (each success takes one port; reusing a TIME_WAIT port replaces
// it). SomeCalls counts the further calls that may succeed or not
// depending on the kernel's random offset (the ends of an odd range: each
// call tries one of the two, so when both are usable one of them is counted
// as sure, in Free or TWReusable, and the other in SomeCalls).
type Result struct {
	Tried      int // ports some call tries (Reserved and NotTried left out)
	Free       int
	HeldForAll int
	FourTuple  int
	TWReusable int
	SomeCalls  int
	Unsure     int
	// Exhausted: no call can succeed, for sure. It is false when any port
	// is Free, TimeWaitReusable, SomeCalls or Unsure.
	Exhausted bool
	// Ports lists every port of the range that is not Free, in order.
	Ports []PortUse
}

// verdict is one port's classification before the even cut is applied.
type verdict struct {
	why   Reason // Free, HeldForAll, FourTuple, TimeWaitReusable or Unsure
	socks []int
	note  string
}

func (v verdict) usable() bool { return v.why == Free || v.why == TimeWaitReusable }

// tally builds a Result over the scans of a range (one, or the two halves
// of inet_csk_find_open_port), with judge classifying each port.
func tally(s Sysctls, scans []scan, lo, hi int, judge func(port int) verdict) Result {
	var r Result
	some := map[int]bool{}
	never := map[int]bool{}
	for _, sc := range scans {
		for _, p := range sc.some {
			some[p] = true
		}
		for _, p := range sc.never {
			never[p] = true
		}
	}
	// Of a pair of ends both usable, the first counts as sure.
	sure := map[int]bool{}
	for _, sc := range scans {
		if len(sc.some) == 2 && !reserved(s, sc.some[0]) && !reserved(s, sc.some[1]) &&
			judge(sc.some[0]).usable() && judge(sc.some[1]).usable() {
			sure[sc.some[0]] = true
		}
	}
	for p := lo; p <= hi; p++ {
		switch {
		case reserved(s, p):
			r.Ports = append(r.Ports, PortUse{Port: p, Why: Reserved})
			continue
		case never[p]:
			r.Ports = append(r.Ports, PortUse{Port: p, Why: NotTried})
			continue
		}
		r.Tried++
		v := judge(p)
		if some[p] && v.usable() && !sure[p] {
			r.SomeCalls++
			r.Ports = append(r.Ports, PortUse{Port: p, Why: SomeCalls, Sockets: v.socks,
				Note: "only some calls try this end of an odd-sized range"})
			continue
		}
		r.count(v.why)
		if v.why != Free {
			r.Ports = append(r.Ports, PortUse{Port: p, Why: v.why, Sockets: v.socks, Note: v.note})
		}
	}
	r.Exhausted = r.Free == 0 && r.TWReusable == 0 && r.SomeCalls == 0 && r.Unsure == 0
	return r
}

func (r *Result) count(why Reason) {
	switch why {
	case Free:
		r.Free++
	case HeldForAll:
		r.HeldForAll++
	case FourTuple:
		r.FourTuple++
	case TimeWaitReusable:
		r.TWReusable++
	case Unsure:
		r.Unsure++
	}
}
