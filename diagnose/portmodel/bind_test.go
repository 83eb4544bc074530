package portmodel

import (
	"net/netip"
	"slices"
	"testing"
)

// TestAddrsOverlap: inet_rcv_saddr_equal with wildcards, across families,
// with IPV6_V6ONLY and the v6only a v6 address implies.
func TestAddrsOverlap(t *testing.T) {
	cases := []struct {
		local, sk2 string
		v6only     bool
		want       bool
	}{
		{"127.0.0.1", "127.0.0.1", false, true},
		{"127.0.0.1", "10.0.0.1", false, false},
		{"127.0.0.1", "0.0.0.0", false, true},
		{"0.0.0.0", "10.0.0.1", false, true},
		{"127.0.0.1", "::", false, true},
		{"127.0.0.1", "::", true, false},
		{"127.0.0.1", "::1", false, false},
		{"0.0.0.0", "::1", false, false},
		{"::1", "::1", false, true},
		{"::1", "::2", false, false},
		{"::1", "::", true, true},
		{"::", "127.0.0.1", false, true},
		{"::1", "0.0.0.0", false, false},
		{"::1", "127.0.0.1", false, false},
	}
	for _, c := range cases {
		sk2 := Socket{Local: netip.AddrPortFrom(netip.MustParseAddr(c.sk2), 1), V6Only: c.v6only}
		if got := addrsOverlap(netip.MustParseAddr(c.local), sk2); got != c.want {
			t.Errorf("%s vs %s (v6only %v): %v, want %v", c.local, c.sk2, c.v6only, got, c.want)
		}
	}
}

// TestBindPort0: every socket of the port on an overlapping address
// conflicts during the scan, connect()-made or not, SO_REUSEADDR or not;
// with SO_REUSEADDR a range of 5 is scanned in halves, 2 and 3 ports, and
// the upper half's highest port is never tried.
func TestBindPort0(t *testing.T) {
	s := Sysctls{Lo: 100, Hi: 103}
	reusing := est(101, dstA, BucketByConnect)
	reusing.Reuse, reusing.Known = true, true
	socks := []Socket{est(100, dstA, BucketByConnect), reusing,
		{Proto: TCP, State: 1, Local: ap("10.0.0.1", 102), Remote: dstA}}
	r := BindPort0(s, socks, src4, TCP, true)
	if r.Free != 2 || whyOf(r, 100) != HeldForAll || whyOf(r, 101) != HeldForAll || whyOf(r, 102) != Free {
		t.Errorf("127.0.0.1: %+v", r)
	}
	if r := BindPort0(s, socks, netip.IPv4Unspecified(), TCP, false); r.Free != 1 {
		t.Errorf("0.0.0.0: %+v", r)
	}
	s.Hi = 104
	if r := BindPort0(s, nil, src4, TCP, true); r.Free != 4 || r.SomeCalls != 0 || whyOf(r, 104) != NotTried {
		t.Errorf("5 ports, SO_REUSEADDR: %+v", r)
	}
	if r := BindPort0(s, nil, src4, TCP, false); r.Free != 4 || r.SomeCalls != 1 {
		t.Errorf("5 ports: %+v", r)
	}
}

// TestBindConflicts: inet_bind_conflict's sharing rules for an explicit
// port, and what the model cannot judge.
func TestBindConflicts(t *testing.T) {
	mk := func(state uint8, reuse, reuseport bool, uid uint32) Socket {
		return Socket{Proto: TCP, State: state, Local: ap("0.0.0.0", 100), Reuse: reuse, ReusePort: reuseport, UID: uid, Known: true}
	}
	cases := []struct {
		name             string
		sk2              Socket
		reuse, reuseport bool
		want             bool
	}{
		{"listener", mk(stateListen, false, false, 0), false, false, true},
		{"listener, SO_REUSEADDR both", mk(stateListen, true, false, 0), true, false, true},
		{"bound, SO_REUSEADDR both", mk(stateClose, true, false, 0), true, false, false},
		{"bound, SO_REUSEADDR new only", mk(stateClose, false, false, 0), true, false, true},
		{"SO_REUSEPORT both, same uid", mk(stateListen, false, true, 5), false, true, false},
		{"SO_REUSEPORT both, other uid", mk(stateListen, false, true, 6), false, true, true},
		{"SO_REUSEPORT both, TIME_WAIT of another uid", mk(stateTimeWait, false, true, 6), false, true, false},
	}
	for _, c := range cases {
		conf, unsure := BindConflicts([]Socket{c.sk2}, ap("127.0.0.1", 100), TCP, c.reuse, c.reuseport, 5)
		if (len(conf) > 0) != c.want || len(unsure) > 0 {
			t.Errorf("%s: conflicts %v unsure %v, want conflict %v", c.name, conf, unsure, c.want)
		}
	}
	unknown := mk(stateClose, true, false, 0)
	unknown.Known = false
	if conf, unsure := BindConflicts([]Socket{unknown}, ap("127.0.0.1", 100), TCP, true, false, 0); len(conf) != 0 || !slices.Equal(unsure, []int{0}) {
		t.Errorf("unknown options: conflicts %v unsure %v", conf, unsure)
	}
	if conf, _ := BindConflicts([]Socket{unknown}, ap("127.0.0.1", 100), TCP, false, false, 0); len(conf) != 1 {
		t.Errorf("unknown options, nothing on the new side: conflicts %v", conf)
	}
	if helps, known := ReuseAddrHelps([]Socket{unknown}, []int{0}); helps || known {
		t.Errorf("ReuseAddrHelps of unknown options: %v %v", helps, known)
	}
	both := []Socket{mk(stateClose, true, false, 0), mk(stateListen, true, false, 0)}
	if helps, known := ReuseAddrHelps(both, []int{0}); !helps || !known {
		t.Errorf("ReuseAddrHelps, bound with SO_REUSEADDR: %v %v", helps, known)
	}
	if helps, _ := ReuseAddrHelps(both, []int{0, 1}); helps {
		t.Errorf("ReuseAddrHelps with a listener: true")
	}
}

// TestUDPPort0: the whole range is tried (no even cut); a UDP socket on a
// port holds it for every destination; SO_REUSEADDR shares only when both
// sides have it, and is Unsure when the old side's options are not read.
func TestUDPPort0(t *testing.T) {
	s := Sysctls{Lo: 100, Hi: 102}
	conn := Socket{Proto: UDP, State: 1, Local: ap("127.0.0.1", 100), Remote: dstB, Known: true}
	shared := Socket{Proto: UDP, State: 7, Local: ap("127.0.0.1", 101), Reuse: true, Known: true}
	notRead := Socket{Proto: UDP, State: 7, Local: ap("127.0.0.1", 102)}
	socks := []Socket{conn, shared, notRead, est(102, dstA, BucketByBind)}
	r := UDPAutobind(s, socks, netip.IPv4Unspecified())
	if r.Tried != 3 || r.HeldForAll != 3 || !r.Exhausted {
		t.Errorf("autobind: %+v", r)
	}
	r = UDPPort0(s, socks, src4, true)
	if whyOf(r, 100) != HeldForAll || whyOf(r, 101) != Free || whyOf(r, 102) != Unsure || r.Exhausted {
		t.Errorf("bind(0) with SO_REUSEADDR: %+v", r)
	}
	if r := BindPort0(s, socks[:1], netip.MustParseAddr("::1"), UDP, false); r.Free != 3 {
		t.Errorf("::1 beside a v4 socket: %+v", r)
	}
}
