package portmodel

import (
	"net/netip"
	"testing"
)

var (
	src4 = netip.MustParseAddr("127.0.0.1")
	dstA = netip.MustParseAddrPort("127.0.0.1:80")
	dstB = netip.MustParseAddrPort("127.0.0.1:81")
)

func ap(a string, p int) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(a), uint16(p)) }

// est is an established socket from 127.0.0.1:port to dst.
func est(port int, dst netip.AddrPort, b Bucket) Socket {
	return Socket{Proto: TCP, State: 1, Local: ap("127.0.0.1", port), Remote: dst, Bucket: b, Inode: 1}
}

// tw is a TIME_WAIT from 127.0.0.1:port to dst with timestamps, entered
// at ms 1000 (second 1).
func tw(port int, dst netip.AddrPort, b Bucket) Socket {
	s := est(port, dst, b)
	s.State, s.Inode = stateTimeWait, 0
	s.TW = TimeWait{Known: true, TSRecent: true, StampSec: 1, StampMS: 1000}
	return s
}

func sys4() Sysctls {
	return Sysctls{Lo: 100, Hi: 103, TWReuse: 1, TWReuseDelayMS: 1000, NowSec: 10, NowMS: 10000}
}

func whyOf(r Result, port int) Reason {
	for _, p := range r.Ports {
		if p.Port == port {
			return p.Why
		}
	}
	return Free
}

// TestConnectBuckets: a bind()-made bucket holds the port for every
// destination; a connect()-made one only its 4-tuple; a listener or a
// bound-only socket makes the bucket bind's whatever it is labelled; an
// unknown bucket is Unsure unless the 4-tuple blocks anyway.
func TestConnectBuckets(t *testing.T) {
	lst := Socket{Proto: TCP, State: stateListen, Local: ap("0.0.0.0", 103)}
	socks := []Socket{
		est(100, dstB, BucketByBind),
		est(101, dstB, BucketByConnect),
		est(102, dstB, BucketUnknown),
		lst, // Bucket unknown, but a listener
		{Proto: UDP, State: 7, Local: ap("0.0.0.0", 101)},
	}
	r := Connect(sys4(), socks, src4, dstA)
	want := map[int]Reason{100: HeldForAll, 101: Free, 102: Unsure, 103: HeldForAll}
	for p, w := range want {
		if got := whyOf(r, p); got != w {
			t.Errorf("port %d: %v, want %v", p, got, w)
		}
	}
	if r.Free != 1 || r.HeldForAll != 2 || r.Unsure != 1 || r.Exhausted {
		t.Errorf("result %+v", r)
	}
	// Toward dstB the unknown bucket's own 4-tuple blocks for sure.
	if got := whyOf(Connect(sys4(), socks, src4, dstB), 102); got != FourTuple {
		t.Errorf("port 102 toward its own destination: %v, want four_tuple", got)
	}
}

// TestConnectFourTuple: only the same source, port and destination block;
// a socket bound to a device does not match an unbound new one.
func TestConnectFourTuple(t *testing.T) {
	dev := est(101, dstA, BucketByConnect)
	dev.BoundDev = 3
	socks := []Socket{
		est(100, dstA, BucketByConnect),
		dev,
		{Proto: TCP, State: 1, Local: ap("10.0.0.1", 102), Remote: dstA, Bucket: BucketByConnect},
		est(103, dstB, BucketByConnect),
	}
	r := Connect(sys4(), socks, src4, dstA)
	want := map[int]Reason{100: FourTuple, 101: Free, 102: Free, 103: Free}
	for p, w := range want {
		if got := whyOf(r, p); got != w {
			t.Errorf("port %d: %v, want %v", p, got, w)
		}
	}
}
