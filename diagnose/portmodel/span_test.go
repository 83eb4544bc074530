package portmodel

import (
	"slices"
	"testing"
)

// simulate runs the kernel's scan loop (__inet_hash_connect when
// firstOdd is false, inet_csk_find_open_port when true) over [lo, hi] for
// one starting offset (before the parity adjustment) and returns the ports
// tried, a transcription of the C loop kept apart from scanOf.
func simulate(lo, hi int, raw uint32, firstOdd bool) map[int]bool {
	low, high := lo, hi+1
	remaining := uint32(high - low)
	if remaining > 1 {
		remaining &^= 1
	}
	offset := raw % remaining
	if firstOdd {
		offset |= 1
	} else {
		offset &^= 1
	}
	tried := map[int]bool{}
	for {
		port := low + int(offset)
		for i := uint32(0); i < remaining; i, port = i+2, port+2 {
			if port >= high {
				port -= int(remaining)
			}
			tried[port] = true
		}
		if firstOdd {
			offset--
			if offset&1 != 0 {
				return tried
			}
		} else {
			offset++
			if offset&1 == 0 || remaining <= 1 {
				return tried
			}
		}
	}
}

// TestScanMatchesKernelLoop: for every range of 1 to 41 ports and every
// offset the kernel can draw, the ports every call tries, some calls try
// and no call tries are what scanOf says, for connect()'s scan and for
// bind(0)'s. Break: make scanOf drop no port for an odd count (or drop lo
// instead of hi for 3 ports) and this fails.
func TestScanMatchesKernelLoop(t *testing.T) {
	for _, firstOdd := range []bool{false, true} {
		for n := 1; n <= 41; n++ {
			lo, hi := 40000, 40000+n-1
			count := map[int]int{}
			for raw := uint32(0); raw < uint32(n)+2; raw++ {
				for p := range simulate(lo, hi, raw, firstOdd) {
					count[p]++
				}
			}
			offsets := n + 2
			sc := scanOf(lo, hi)
			for p := lo; p <= hi; p++ {
				var want string
				switch {
				case count[p] == offsets:
					want = "every"
				case count[p] == 0:
					want = "never"
				default:
					want = "some"
				}
				got := "every"
				switch {
				case slices.Contains(sc.never, p):
					got = "never"
				case slices.Contains(sc.some, p):
					got = "some"
				case !sc.every[p]:
					got = "missing"
				}
				if got != want {
					t.Errorf("firstOdd=%v range %d-%d port %d: scanOf says %s, the loop tries it in %d of %d offsets (%s)",
						firstOdd, lo, hi, p, got, count[p], offsets, want)
				}
			}
		}
	}
}

// TestTried: the even range is tried whole, 3 ports lose the highest, 11
// ports have their ends tried by some calls only, reserved ports are out.
func TestTried(t *testing.T) {
	s := Sysctls{Lo: 40000, Hi: 40009, Reserved: []Span{{40003, 40004}}}
	if got := Tried(s); len(got) != 8 || slices.Contains(got, 40003) || slices.Contains(got, 40004) {
		t.Errorf("Tried(40000-40009, reserved 40003-40004) = %v", got)
	}
	s = Sysctls{Lo: 40000, Hi: 40002}
	if got, never := Tried(s), NeverTried(s); !slices.Equal(got, []int{40000, 40001}) || !slices.Equal(never, []int{40002}) {
		t.Errorf("40000-40002: Tried %v NeverTried %v, want [40000 40001] and [40002]", got, never)
	}
	s = Sysctls{Lo: 40000, Hi: 40010}
	if got, some := Tried(s), TriedBySome(s); len(got) != 9 || !slices.Equal(some, []int{40000, 40010}) {
		t.Errorf("40000-40010: Tried %v TriedBySome %v", got, some)
	}
}

func TestUnreserved(t *testing.T) {
	s := Sysctls{Lo: 40000, Hi: 40009, Reserved: []Span{{40002, 40003}, {39000, 39999}}}
	for _, c := range []struct{ lo, hi, want int }{{40000, 40009, 8}, {39990, 40001, 2}, {40002, 40003, 0}, {50000, 60000, 0}} {
		if got := s.Unreserved(c.lo, c.hi); got != c.want {
			t.Errorf("Unreserved(%d, %d) = %d, want %d", c.lo, c.hi, got, c.want)
		}
	}
	if !s.IsReserved(40002) || s.IsReserved(40004) {
		t.Error("IsReserved")
	}
}
