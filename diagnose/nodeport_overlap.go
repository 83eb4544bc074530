package diagnose

import (
	"fmt"

	"github.com/eaddr/eaddr/diagnose/netdiag"
)

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

// NodePortFix is the advice for the host netns, whose source ports must stay
// out of the NodePort range [lo, hi].
func NodePortFix(lo, hi int) string {
	return fmt.Sprintf("net.ipv4.ip_local_reserved_ports=%d-%d, or a net.ipv4.ip_local_port_range that does not overlap the NodePort range %d-%d", lo, hi, lo, hi)
}
