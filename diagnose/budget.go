package diagnose

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// Budget is how a netns spends its ephemeral ports, counted one way for
// `eaddr check` and for a failed connect()'s diagnosis.
type Budget struct {
	Usable    int                    // ports of the range that are not reserved
	InUse     int                    // of those, held by a socket that does not listen
	PerDest   map[netip.AddrPort]int // ports held toward each destination
	Listeners []string               // listening sockets inside the range, sorted
}

// Ephemeral is true for a port the kernel may hand out as a source port:
// inside ip_local_port_range and not reserved.
func Ephemeral(sc *netdiag.PortSysctls, port int) bool {
	return port >= sc.RangeLo && port <= sc.RangeHi && !sc.IsReserved(port)
}

// CountBudget counts the ports of the range in use, in all and per
// destination, and the listeners inside it.
func CountBudget(sc *netdiag.PortSysctls, socks []netdiag.Socket) Budget {
	b := Budget{Usable: sc.Usable(), PerDest: map[netip.AddrPort]int{}}
	used := map[uint16]bool{}
	perDest := map[netip.AddrPort]map[uint16]bool{}
	for _, s := range socks {
		p := s.Local.Port()
		if !Ephemeral(sc, int(p)) {
			continue
		}
		if s.State == netdiag.StateListen {
			b.Listeners = append(b.Listeners, s.Local.String())
			continue
		}
		used[p] = true
		if s.Remote.Port() == 0 {
			continue
		}
		if perDest[s.Remote] == nil {
			perDest[s.Remote] = map[uint16]bool{}
		}
		perDest[s.Remote][p] = true
	}
	b.InUse = len(used)
	for remote, ports := range perDest {
		b.PerDest[remote] = len(ports)
	}
	sort.Strings(b.Listeners)
	return b
}

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

// NodePortOverlapModel is NodePortOverlap for the model's sysctls.
func NodePortOverlapModel(sc portmodel.Sysctls, lo, hi int) int {
	n := 0
	for p := max(sc.Lo, lo); p <= min(sc.Hi, hi); p++ {
		reserved := false
		for _, r := range sc.Reserved {
			reserved = reserved || (p >= r.Lo && p <= r.Hi)
		}
		if !reserved {
			n++
		}
	}
	return n
}
