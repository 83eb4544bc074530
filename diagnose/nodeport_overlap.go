package diagnose

import "github.com/eaddr/eaddr/diagnose/netdiag"

// NodePortOverlap is the number of unreserved ports the range shares with
// the NodePort range [lo, hi].
func NodePortOverlap(sc *netdiag.PortSysctls, lo, hi int) int {
	n := 0
	for p := max(sc.RangeLo, lo); p <= min(sc.RangeHi, hi); p++ {
		if !sc.IsReserved(p) {
			n++
		}
	}
	return n
}
