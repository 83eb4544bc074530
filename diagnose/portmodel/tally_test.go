package portmodel

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

var (
	tallyLocals = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("127.0.0.1")}
	tallyDsts   = []netip.AddrPort{netip.MustParseAddrPort("10.9.0.1:80"), netip.MustParseAddrPort("10.9.0.2:443"),
		netip.MustParseAddrPort("127.0.0.1:8080")}
)

// randomScene is a netns of a few ports whose sockets keep the kernel's
// invariants: one bind bucket a port, shared by its sockets (read by the
// BPF readers, or, with diag, unknown but for listeners and sockets only
// bound, as sock_diag shows them), one socket a 4-tuple. The sockets that
// hold a port for all come first, as both readers list them.
func randomScene(rng *rand.Rand, diag bool) (Sysctls, []Socket) {
	n := 3 + rng.IntN(10)
	s := Sysctls{Lo: 40000, Hi: 40000 + n - 1, TWReuse: rng.IntN(3), TWReuseDelayMS: -1, NowSec: 1000, NowMS: 1000_000}
	if rng.IntN(2) == 0 {
		s.TWReuseDelayMS = 1000
	}
	if rng.IntN(3) == 0 {
		p := s.Lo + rng.IntN(n)
		s.Reserved = []Span{{p, p + rng.IntN(2)}}
	}
	var first, rest []Socket
	taken := map[string]bool{}
	for p := s.Lo - 1; p <= s.Hi+1; p++ {
		byBind := rng.IntN(3) == 0
		bucket := BucketByConnect
		if byBind {
			bucket = BucketByBind
		}
		if byBind && rng.IntN(2) == 0 {
			state := uint8(stateListen)
			if rng.IntN(2) == 0 {
				state = stateClose
			}
			first = append(first, Socket{Proto: TCP, State: state, Local: netip.AddrPortFrom(tallyLocals[rng.IntN(2)], uint16(p)), Bucket: bucket})
		}
		for range rng.IntN(4) {
			sk := randomConn(rng, s, uint16(p), bucket)
			key := fmt.Sprint(sk.Local, sk.Remote)
			if taken[key] {
				continue
			}
			taken[key] = true
			rest = append(rest, sk)
		}
	}
	socks := append(first, rest...)
	if diag {
		for i := range socks {
			socks[i] = asSockDiag(socks[i])
		}
	}
	return s, socks
}

// randomConn is a connection on port p toward one of tallyDsts: open, or
// TIME_WAIT with or without timestamps, young or old.
func randomConn(rng *rand.Rand, s Sysctls, p uint16, bucket Bucket) Socket {
	sk := Socket{Proto: TCP, State: uint8(1 + rng.IntN(5)), Local: netip.AddrPortFrom(tallyLocals[rng.IntN(3)], p),
		Remote: tallyDsts[rng.IntN(3)], Bucket: bucket}
	if rng.IntN(8) == 0 {
		sk.BoundDev = 2
	}
	if rng.IntN(2) == 0 {
		sk.State = stateTimeWait
		sk.TW = TimeWait{Known: true, TSRecent: rng.IntN(3) > 0, StampSec: s.NowSec - int64(rng.IntN(3)), StampMS: s.NowMS - int64(rng.IntN(3000))}
	}
	return sk
}

// asSockDiag is sk as FromSockDiag gives it: the bucket known only for a
// listener and a socket in CLOSE, no TIME_WAIT stamps.
func asSockDiag(sk Socket) Socket {
	sk.Bucket = BucketUnknown
	if sk.State == stateListen || sk.State == stateClose {
		sk.Bucket = BucketByBind
	}
	sk.TW = TimeWait{}
	return sk
}

// counts is a Result without its list of ports.
func counts(r Result) string {
	r.Ports = nil
	return fmt.Sprintf("%+v", r)
}

// TestTallyEqualsConnect: for thousands of random netns, as the BPF readers
// and as sock_diag see them, the tally counted as the sockets come gives,
// toward every destination and toward none, the very Result Connect gives
// from the whole list of sockets (but the list of ports), with the source
// the tally picks; and that source holds the most ports toward it.
func TestTallyEqualsConnect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		diag := i%2 == 1
		s, socks := randomScene(rng, diag)
		ty := NewTally(s, 0)
		for j := range socks {
			ty.Add(&socks[j])
		}
		if got, want := counts(ty.Idle()), counts(Connect(s, socks, netip.Addr{}, netip.AddrPort{})); got != want {
			t.Fatalf("scene %d (diag %v), toward none:\n tally   %+v\n Connect %+v\n%+v\n%s", i, diag, got, want, s, fmtSocks(socks))
		}
		for _, dst := range tallyDsts {
			got, src := ty.Connect(dst)
			if !src.IsValid() {
				src = tallyLocals[0] // no socket goes there: any source is free
			}
			want := Connect(s, socks, src, dst)
			if counts(got) != counts(want) {
				t.Fatalf("scene %d (diag %v), toward %v from %v:\n tally   %+v\n Connect %+v\n%+v\n%s", i, diag, dst, src, counts(got), counts(want), s, fmtSocks(socks))
			}
			for _, other := range tallyLocals {
				if o := Connect(s, socks, other, dst); o.FourTuple > want.FourTuple {
					t.Fatalf("scene %d: the tally picked %v toward %v (%d ports), but %v holds %d", i, src, dst, want.FourTuple, other, o.FourTuple)
				}
			}
		}
	}
}

func fmtSocks(socks []Socket) string {
	out := ""
	for _, s := range socks {
		out += fmt.Sprintf("  %+v\n", s)
	}
	return out
}

// TestTallyBusiest: the destinations in order of the sockets toward them,
// each counted once however many sources it has; a socket on a port held
// for all counts for none (it is an accepted connection of a listener, or
// a bind() then connect(), whose port is held for every destination).
func TestTallyBusiest(t *testing.T) {
	s := Sysctls{Lo: 40000, Hi: 40099, TWReuseDelayMS: -1}
	ty := NewTally(s, 0)
	add := func(port uint16, local, dst string, b Bucket, state uint8) {
		ty.Add(&Socket{Proto: TCP, State: state, Local: netip.AddrPortFrom(netip.MustParseAddr(local), port), Remote: netip.MustParseAddrPort(dst), Bucket: b})
	}
	ty.Add(&Socket{Proto: TCP, State: stateListen, Local: netip.MustParseAddrPort("0.0.0.0:40050"), Bucket: BucketByBind})
	for p := range uint16(3) {
		add(40000+p, "10.0.0.1", "10.9.0.1:80", BucketByConnect, 1)
		add(40010+p, "10.0.0.2", "10.9.0.1:80", BucketByConnect, 1)
		add(40050, "10.0.0.1", fmt.Sprintf("10.8.0.%d:5000", p), BucketByBind, 1) // clients of the listener
	}
	add(40020, "10.0.0.1", "10.9.0.2:443", BucketByConnect, 1)
	add(30000, "10.0.0.1", "10.9.0.3:443", BucketByConnect, 1) // outside the range
	if got := fmt.Sprint(ty.Busiest(5)); got != "[10.9.0.1:80 10.9.0.2:443]" {
		t.Errorf("Busiest: %s", got)
	}
	r, src := ty.Connect(netip.MustParseAddrPort("10.9.0.1:80"))
	if r.FourTuple != 3 || r.HeldForAll != 1 || src != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("toward 10.9.0.1:80: %+v from %v, want 3 ports from 10.0.0.1 (the first of two with 3) and 1 held for all", r, src)
	}
	ls, n := ty.Listeners()
	if n != 1 || !slices.Equal(ls, []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:40050")}) || ty.InUse() != 8 {
		t.Errorf("listeners %v (%d), in use %d; want the one, and 8 ports", ls, n, ty.InUse())
	}
}

// TestTallyCut: past MaxDests destinations, new ones are not counted, and
// the sockets left out are.
func TestTallyCut(t *testing.T) {
	ty := NewTally(Sysctls{Lo: 40000, Hi: 40999, TWReuseDelayMS: -1}, 2)
	for i := range 5 {
		ty.Add(&Socket{Proto: TCP, State: 1, Local: netip.AddrPortFrom(tallyLocals[0], uint16(40000+i)),
			Remote: netip.AddrPortFrom(tallyLocals[1], uint16(1000+i%3)), Bucket: BucketByConnect})
	}
	if ty.Dests() != 2 || ty.Cut() != 1 {
		t.Errorf("%d destinations, %d sockets cut; want 2 and 1 (the third destination's)", ty.Dests(), ty.Cut())
	}
}
