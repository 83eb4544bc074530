package diagnose

import (
	"net/netip"
	"sort"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// auditPorts is check's port budget, from the same model as a failure's
// diagnosis: for the destinations with the most sockets, how many ports a
// connect() toward each could not have; and the ports held for every
// destination (bound sockets, listeners, their orphans).
func auditPorts(r *NetNSReport, p *portScene, o AuditOptions) {
	r.Usable = p.usable()
	idle := portmodel.Connect(p.sc, p.socks, netip.Addr{}, netip.AddrPort{})
	r.HeldForAll, r.Unsure = idle.HeldForAll, idle.Unsure
	r.Source = p.source
	used := map[uint16]bool{}
	for _, s := range p.socks {
		if s.State != netdiag.StateListen && p.inRange(int(s.Local.Port())) {
			used[s.Local.Port()] = true
		}
		if s.State == netdiag.StateListen && p.inRange(int(s.Local.Port())) {
			r.Listeners = append(r.Listeners, s.Local.String())
		}
	}
	r.InUse = len(used)
	sort.Strings(r.Listeners)
	for _, dst := range busiest(p, max(o.Top, 1)*2) {
		res := portmodel.Connect(p.sc, p.socks, p.sourceFor(netip.Addr{}, dst.Addr()), dst)
		// only the ports the model is sure of: an unsure one is counted apart
		n := res.FourTuple + res.HeldForAll
		r.Destinations = append(r.Destinations, Destination{Remote: dst.String(), Ports: n, Percent: percent(n, res.Tried),
			Toward: res.FourTuple, HeldForAll: res.HeldForAll, Unsure: res.Unsure, Exhausted: res.Exhausted, Tried: res.Tried})
	}
}

// inRange: a port the kernel may hand out (inside the range, not reserved).
func (p *portScene) inRange(port int) bool {
	return port >= p.sc.Lo && port <= p.sc.Hi && !p.sc.IsReserved(port)
}

// busiest are the n remote addresses toward which the most TCP sockets
// hold a port of the range (a server's accepted sockets hold its own port).
func busiest(p *portScene, n int) []netip.AddrPort {
	count := map[netip.AddrPort]int{}
	for _, s := range p.socks {
		if s.Proto == portmodel.TCP && s.Remote.Port() != 0 && s.State != netdiag.StateListen && p.inRange(int(s.Local.Port())) {
			count[s.Remote]++
		}
	}
	out := make([]netip.AddrPort, 0, len(count))
	for a := range count {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if count[out[i]] != count[out[j]] {
			return count[out[i]] > count[out[j]]
		}
		return out[i].String() < out[j].String()
	})
	return out[:min(len(out), n)]
}
