package portmodel

import "slices"

// The kernel scans a range [low, high] two ports at a time, starting at a
// random offset, once per parity, and rounds the count of ports down to an
// even number first (__inet_hash_connect, inet_csk_find_open_port):
//
//	high++;                       /* [low, high+1[ */
//	remaining = high - low;
//	if (likely(remaining > 1))
//		remaining &= ~1U;
//	...
//	port = low + offset;
//	for (i = 0; i < remaining; i += 2, port += 2) {
//		if (unlikely(port >= high))
//			port -= remaining;
//
// With an even count every port is tried. With an odd count N the wrap
// happens at high, not at low+remaining: in the pass of low's parity the
// call whose offset is 0 tries low..high-2 and never high, and every other
// call tries low+2..high and never low. So for N >= 5 each call tries
// exactly one of the two edge ports, low or high, and which one depends on
// the offset (connect(): table_perturb and the destination's hash; bind(0):
// prandom), so it cannot be told in advance. For N == 3 the offset is always
// 0 and high is never tried. The other parity's pass always covers all its
// ports. The brute-force simulation in span_test.go checks this for every
// offset of every small range.

// scan is what one of the kernel's scans of [lo, hi] tries.
type scan struct {
	every map[int]bool // ports every call tries
	some  []int        // ports only some calls try (the edges of an odd count)
	never []int        // ports no call tries
}

// scanOf works out scan for the inclusive range [lo, hi] as
// __inet_hash_connect and inet_csk_find_open_port walk it.
func scanOf(lo, hi int) scan {
	sc := scan{every: map[int]bool{}}
	sc.some, sc.never = scanEdges(lo, hi)
	for p := lo; p <= hi; p++ {
		if !slices.Contains(sc.some, p) && !slices.Contains(sc.never, p) {
			sc.every[p] = true
		}
	}
	return sc
}

// scanEdges is the ports of [lo, hi] that not every scan tries: some (the
// edges of an odd count of 5 or more), never (the highest of 3). Without
// scanOf's map of every port, which a Tally does not need (a sample made
// one a netns: 1.7 MB of a 28,232-port range, most of its time).
func scanEdges(lo, hi int) (some, never []int) {
	switch n := hi - lo + 1; {
	case lo > hi || n%2 == 0 || n == 1:
	case n == 3:
		never = []int{hi}
	default:
		some = []int{lo, hi}
	}
	return some, never
}

// reserved says whether port is in net.ipv4.ip_local_reserved_ports, which
// both scans skip (inet_is_local_reserved_port) and udp_lib_get_port too.
func reserved(s Sysctls, port int) bool {
	for _, r := range s.Reserved {
		if r.Lo <= port && port <= r.Hi {
			return true
		}
	}
	return false
}

// IsReserved says whether port is in net.ipv4.ip_local_reserved_ports.
func (s Sysctls) IsReserved(port int) bool { return reserved(s, port) }

// Unreserved counts the ports of [lo, hi] inside ip_local_port_range that
// are not reserved: [s.Lo, s.Hi] gives the range's usable ports.
func (s Sysctls) Unreserved(lo, hi int) int {
	n := 0
	for p := max(lo, s.Lo); p <= min(hi, s.Hi); p++ {
		if !reserved(s, p) {
			n++
		}
	}
	return n
}

// Tried returns the ports that every connect() without a bound port tries
// (__inet_hash_connect): ip_local_port_range without
// ip_local_reserved_ports and without the ports the even-count cut leaves
// out (see TriedBySome). The order is not the kernel's.
func Tried(s Sysctls) []int {
	sc := scanOf(s.Lo, s.Hi)
	var out []int
	for p := s.Lo; p <= s.Hi; p++ {
		if sc.every[p] && !reserved(s, p) {
			out = append(out, p)
		}
	}
	return out
}

// TriedBySome returns the ports that only some connect() calls try: with
// an odd count of at least 5 ports in ip_local_port_range, its two ends,
// of which each call tries exactly one. Reserved ports are left out.
func TriedBySome(s Sysctls) []int {
	var out []int
	for _, p := range scanOf(s.Lo, s.Hi).some {
		if !reserved(s, p) {
			out = append(out, p)
		}
	}
	return out
}

// NeverTried returns the ports of ip_local_port_range that no connect()
// tries: with exactly 3 ports, the highest.
func NeverTried(s Sysctls) []int {
	return scanOf(s.Lo, s.Hi).never
}
