package sockscene

import (
	"net/netip"
	"strings"
)

// address-gone: bind() to an address that was configured and is no more.
func buildAddressGone(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.veth("10.0.0.1/24", "10.0.0.2/24")
	r.ipCmd("addr", "del", "10.0.0.2/24", "dev", "s0")
	a := ap(netip.MustParseAddr("10.0.0.2"), 0)
	r.victim(s, call{sys: "bind", proto: "tcp", local: a})
	s.AddrFlags = r.addrLine(a.Addr())
	r.truth(s)
}

// address-tentative: bind() to an IPv6 address still in duplicate address
// detection. DAD runs on s0 (a veth: no IFF_NOARP, unlike dummy) and is
// made to last (10 probes 30 s apart) so the address stays tentative
// however slow the machine is.
func buildAddressTentative(r *rig, s *Scene) {
	r.setRange(rangeLo, rangeHi)
	r.veth()
	r.sysctl("net.ipv6.conf.s0.dad_transmits", "10")
	r.sysctl("net.ipv6.neigh.s0.retrans_time_ms", "30000")
	addr := netip.MustParseAddr("fd00::1")
	r.ipCmd("-6", "addr", "add", addr.String()+"/64", "dev", "s0")
	r.victim(s, call{sys: "bind", proto: "tcp", local: ap(addr, 0)})
	s.AddrFlags = r.addrLine(addr)
	r.truth(s)
}

// addrLine is the `ip -o addr` line of a, "" when a is not configured.
func (r *rig) addrLine(a netip.Addr) string {
	r.t.Helper()
	for _, line := range strings.Split(r.ipCmd("-o", "addr"), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if (f[i] == "inet" || f[i] == "inet6") && strings.HasPrefix(f[i+1], a.String()+"/") {
				return strings.TrimSpace(line)
			}
		}
	}
	return ""
}
