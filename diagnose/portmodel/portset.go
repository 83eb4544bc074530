package portmodel

import "math/bits"

// PortSet is a set of ports, one bit each: 8 KiB whatever it holds.
type PortSet [1024]uint64

// Add puts p in the set.
func (s *PortSet) Add(p uint16) { s[p/64] |= 1 << (p % 64) }

// Has says whether p is in the set.
func (s *PortSet) Has(p uint16) bool { return s[p/64]&(1<<(p%64)) != 0 }

// Len is how many ports the set holds.
func (s *PortSet) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

func popcount(x uint64) int { return bits.OnesCount64(x) }

// spanMask is the bits of word w (ports 64w..64w+63) inside [lo, hi].
func spanMask(w, lo, hi int) uint64 {
	first, last := w*64, w*64+63
	if hi < first || lo > last {
		return 0
	}
	m := ^uint64(0)
	if lo > first {
		m &^= 1<<(lo-first) - 1
	}
	if hi < last {
		m &= 1<<(hi-first+1) - 1
	}
	return m
}

// SpanSet is the ports of spans.
func SpanSet(spans []Span) *PortSet {
	var s PortSet
	for _, sp := range spans {
		for w := max(sp.Lo, 0) / 64; w <= min(sp.Hi, 65535)/64; w++ {
			s[w] |= spanMask(w, sp.Lo, sp.Hi)
		}
	}
	return &s
}
