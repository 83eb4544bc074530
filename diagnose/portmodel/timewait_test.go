package portmodel

import "testing"

// TestTWReuse: tcp_twsk_unique's conditions one by one, for a connect()
// that picks its port (twp != NULL) and one from a bound port (twp ==
// NULL). sys4's clock is at second 10, ms 10000; tw entered at ms 1000.
func TestTWReuse(t *testing.T) {
	nl := tw(100, ap("10.0.0.2", 80), BucketByConnect)
	nl.Local = ap("10.0.0.1", 100)
	onLo := nl
	onLo.BoundDev = loopbackIfindex
	cases := []struct {
		name  string
		mod   func(s *Sysctls, sk *Socket)
		sk    Socket
		bound bool
		want  Reason
	}{
		{"reuse=1, old enough", func(*Sysctls, *Socket) {}, tw(100, dstA, 0), false, TimeWaitReusable},
		{"reuse=0", func(s *Sysctls, _ *Socket) { s.TWReuse = 0 }, tw(100, dstA, 0), false, FourTuple},
		{"reuse=0, bound port", func(s *Sysctls, _ *Socket) { s.TWReuse = 0 }, tw(100, dstA, 0), true, TimeWaitReusable},
		{"no timestamps", func(_ *Sysctls, sk *Socket) { sk.TW.TSRecent = false }, tw(100, dstA, 0), false, FourTuple},
		{"no timestamps, bound port", func(_ *Sysctls, sk *Socket) { sk.TW.TSRecent = false }, tw(100, dstA, 0), true, FourTuple},
		{"not read", func(_ *Sysctls, sk *Socket) { sk.TW.Known = false }, tw(100, dstA, 0), false, Unsure},
		{"reuse=2, loopback", func(s *Sysctls, _ *Socket) { s.TWReuse = 2 }, tw(100, dstA, 0), false, TimeWaitReusable},
		{"reuse=2, not loopback", func(s *Sysctls, _ *Socket) { s.TWReuse = 2 }, nl, false, FourTuple},
		{"bound to lo: not an unbound socket's 4-tuple (inet_match)", func(s *Sysctls, _ *Socket) { s.TWReuse = 2 }, onLo, false, Free},
		{"reuse=1, not loopback", func(*Sysctls, *Socket) {}, nl, false, TimeWaitReusable},
		{"delay not over", func(s *Sysctls, _ *Socket) { s.TWReuseDelayMS = 9000 }, tw(100, dstA, 0), false, FourTuple},
		{"delay just over", func(s *Sysctls, _ *Socket) { s.TWReuseDelayMS = 8999 }, tw(100, dstA, 0), false, TimeWaitReusable},
		{"6.1: same second", func(s *Sysctls, _ *Socket) { s.TWReuseDelayMS, s.NowSec = -1, 1 }, tw(100, dstA, 0), false, FourTuple},
		{"6.1: next second", func(s *Sysctls, _ *Socket) { s.TWReuseDelayMS, s.NowSec = -1, 2 }, tw(100, dstA, 0), false, TimeWaitReusable},
		{"FIN_WAIT2 substate", func(_ *Sysctls, sk *Socket) { sk.State = 5 }, tw(100, dstA, 0), false, FourTuple},
		{"FIN_WAIT2 substate, bound port", func(_ *Sysctls, sk *Socket) { sk.State = 5 }, tw(100, dstA, 0), true, TimeWaitReusable},
		{"FIN_WAIT2 orphan, bound port", func(_ *Sysctls, sk *Socket) { sk.State, sk.Orphan = 5, true }, tw(100, dstA, 0), true, FourTuple},
	}
	for _, c := range cases {
		s, sk := sys4(), c.sk
		sk.Bucket = BucketByConnect
		c.mod(&s, &sk)
		dst := sk.Remote
		var got Reason
		if c.bound {
			got = ConnectFromPort(s, []Socket{sk}, sk.Local, dst).Why
		} else {
			got = whyOf(Connect(s, []Socket{sk}, sk.Local.Addr(), dst), 100)
		}
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestExhausted: Exhausted only when nothing can be had; a port the model
// is unsure of, or one only some calls try, keeps it false.
func TestExhausted(t *testing.T) {
	full := []Socket{est(100, dstA, BucketByConnect), est(101, dstA, BucketByConnect),
		est(102, dstA, BucketByConnect), est(103, dstA, BucketByConnect)}
	if r := Connect(sys4(), full, src4, dstA); !r.Exhausted || r.FourTuple != 4 {
		t.Errorf("full: %+v", r)
	}
	full[3].Bucket = BucketUnknown
	full[3].Remote = dstB
	if r := Connect(sys4(), full, src4, dstA); r.Exhausted || r.Unsure != 1 {
		t.Errorf("one unknown bucket: %+v", r)
	}
	s := sys4()
	s.Hi = 104 // 5 ports: 100 and 104 are tried by some calls only
	five := append(full[:3:3], est(103, dstA, BucketByConnect))
	r := Connect(s, five, src4, dstA)
	if r.Exhausted || r.Free != 0 || r.SomeCalls != 1 || whyOf(r, 104) != SomeCalls {
		t.Errorf("only an end free: %+v", r)
	}
	s.Reserved = []Span{{104, 104}}
	if r := Connect(s, five, src4, dstA); !r.Exhausted || whyOf(r, 104) != Reserved {
		t.Errorf("the end reserved: %+v", r)
	}
}
