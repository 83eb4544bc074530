package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// A wider range must not hand a port the netns serves on to a connection:
// a listener that restarts (or a UDP server that binds again) would then
// fail with EADDRINUSE for as long as that connection lives, which is what
// `eaddr check` warns of as a listener inside the range. So every range a
// fix advises is checked against the netns's own listeners: it starts above
// them, or the same fix reserves them (ip_local_reserved_ports keeps a
// port from connect() and bind(0), while an explicit bind() still gets it:
// inet_is_local_reserved_port is asked only when the kernel chooses).

// minRangeLo is where an advised range may start: 1024 keeps clear of the
// privileged ports.
const minRangeLo = 1024

// servedPorts are the ports the netns serves on (from 1024), sorted: its
// TCP listeners, and its UDP sockets that are not connected and are bound
// to a port the kernel could not have chosen for them (outside the range,
// or reserved), so a program asked for it. A UDP socket on a port the
// kernel may have chosen is a client's as likely as a server's.
func servedPorts(sc portmodel.Sysctls, socks []portmodel.Socket) []int {
	seen := map[int]bool{}
	var out []int
	for _, s := range socks {
		port := int(s.Local.Port())
		serves := s.Proto == portmodel.TCP && s.State == netdiag.StateListen
		if s.Proto == portmodel.UDP && s.State != netdiag.StateEstablished {
			serves = port < sc.Lo || port > sc.Hi || sc.IsReserved(port)
		}
		if serves && port >= minRangeLo && !seen[port] {
			seen[port] = true
			out = append(out, port)
		}
	}
	slices.Sort(out)
	return out
}

// unreservedIn are the ports of served within [lo, hi] that sc does not
// reserve yet.
func unreservedIn(sc portmodel.Sysctls, served []int, lo, hi int) []int {
	var out []int
	for _, p := range served {
		if p >= lo && p <= hi && !sc.IsReserved(p) {
			out = append(out, p)
		}
	}
	return out
}

// rangePlan is a range a fix advises, with the words that say why it is safe.
type rangePlan struct {
	set  portSettings
	why  string
	gets int // ports the kernel then hands out
}

// widerRange is the widest range for a netns that is not the host's, clear
// of the ports it serves on: starting above the highest of them when that
// still gives at least half of what 1024-65535 with them reserved gives
// (no reserve to keep up to date, and ports below, where a listener added
// later most likely binds, stay clear), else 1024-65535 with them
// reserved. ok is false when neither gives more ports than now.
func widerRange(sc portmodel.Sysctls, served []int) (plan rangePlan, ok bool) {
	now := sc.Unreserved(sc.Lo, sc.Hi)
	need := unreservedIn(sc, served, minRangeLo, 65535)
	lo := minRangeLo
	if len(need) > 0 {
		lo = evenUp(need[len(need)-1] + 1)
	}
	all := portSettings{lo: minRangeLo, hi: 65535, reserved: withPorts(sc.Reserved, need), reserve: len(need) > 0}
	above := portSettings{lo: lo, hi: 65535}
	if lo <= 65534 && above.ports(sc) > now && 2*above.ports(sc) >= all.ports(sc) {
		why := "1024 keeps clear of the privileged ports, and no port above it is listened on here"
		if len(need) > 0 {
			why = fmt.Sprintf("it starts above %d, the highest port this netns listens on, so a listener that restarts never finds its port taken by a connection", need[len(need)-1])
		}
		return rangePlan{set: above, why: why, gets: above.ports(sc)}, true
	}
	if all.ports(sc) <= now {
		return rangePlan{}, false
	}
	why := fmt.Sprintf("the reserve keeps the ports this netns listens on (%s) from connect() and bind(0), while their listeners still bind them; a range above them would give %d", portList(need), above.ports(sc))
	return rangePlan{set: all, why: why, gets: all.ports(sc)}, true
}

// rangeFix: a wider range, checked against the netns: never the range in
// effect, never over a port it listens on unless the fix reserves it, and
// on the host never one that hands out NodePorts. The words say whose
// range it is and how its owner sets it.
func (d *Diagnoser) rangeFix(p *portScene) string {
	o := d.owner(p)
	if o.kind == ownerHost {
		return d.hostRangeFix(p)
	}
	plan, ok := widerRange(p.sc, p.served)
	if !ok {
		return "" // as wide as it goes, clear of the ports it listens on
	}
	return fmt.Sprintf("widen %s: %s gives %d ports (now %d): %s", o.rangeName(), o.command(plan.set), plan.gets, p.usable(), plan.why)
}

// hostRangeFix: on the host a wider range must stay clear of the NodePort
// range and of the node's listeners; it is advised only when it gives more
// ports than the range has now.
func (d *Diagnoser) hostRangeFix(p *portScene) string {
	npLo, npHi := d.NodePortLo, d.NodePortHi
	now := p.usable()
	plan, ok := hostRange(p, max(npHi+1, minRangeLo), 65535)
	var s string
	if ok && plan.gets > now {
		s = fmt.Sprintf("this is the host network namespace (node daemons, hostNetwork pods): widen the range but keep it out of the NodePort range %d-%d: %s gives %d ports (now %d)%s",
			npLo, npHi, owner{kind: ownerHost}.command(plan.set), plan.gets, now, plan.why)
	} else {
		s = fmt.Sprintf("this is the host network namespace: no wider range stays out of the NodePort range %d-%d; open fewer connections", npLo, npHi)
	}
	if overlap := p.sc.Unreserved(npLo, npHi); overlap > 0 {
		s += fmt.Sprintf("; the range now overlaps the NodePort range in %d ports, whose replies a NodePort rule can take", overlap)
	}
	return s
}

// hostRange is the range [lo, hi] for the host (lo made even and hi odd,
// as ip-sysctl.txt advises, so connect() tries every port) with the
// node's listeners inside it reserved; ok is false when no port is left.
func hostRange(p *portScene, lo, hi int) (rangePlan, bool) {
	lo = evenUp(lo)
	if hi%2 == 0 {
		hi--
	}
	if lo >= hi {
		return rangePlan{}, false
	}
	need := unreservedIn(p.sc, p.served, lo, hi)
	set := portSettings{lo: lo, hi: hi, reserved: withPorts(p.sc.Reserved, need), reserve: len(need) > 0}
	plan := rangePlan{set: set, gets: set.ports(p.sc)}
	if len(need) > 0 {
		plan.why = fmt.Sprintf("; the reserve keeps the ports the node listens on inside it (%s) from connect() and bind(0), while their listeners still bind them", portList(need))
	}
	return plan, plan.gets > 0
}

// listenerFix: move the listeners, or reserve their ports when the
// reserve still leaves ports.
func (d *Diagnoser) listenerFix(p *portScene, gr portGroup) string {
	var ports []int
	for _, i := range gr.socks {
		if s := p.socks[i]; s.State == netdiag.StateListen && !slices.Contains(ports, int(s.Local.Port())) {
			ports = append(ports, int(s.Local.Port()))
		}
	}
	slices.Sort(ports)
	set := portSettings{reserved: withPorts(p.sc.Reserved, ports), reserve: true}
	what := fmt.Sprintf("the listener on port %s", portList(ports))
	if len(ports) > 1 {
		what = fmt.Sprintf("the listeners on ports %s", portList(ports))
	}
	left := set.ports(p.sc)
	if left == 0 {
		return fmt.Sprintf("move %s out of the range: reserving %s would leave no port", what, them(ports))
	}
	o := d.owner(p)
	return fmt.Sprintf("move %s out of ip_local_port_range, or reserve %s in %s: %s (leaving %s of the range usable)",
		what, them(ports), o.rangeName(), o.command(set), portCount(left))
}

func them(ports []int) string {
	if len(ports) == 1 {
		return "it"
	}
	return "them"
}

// owner is whose the scene's netns is, found once (ownerOf).
func (d *Diagnoser) owner(p *portScene) owner {
	if p.own == nil {
		o := d.ownerOf(p.ns, p.pod)
		p.own = &o
	}
	return *p.own
}

// evenUp is p, or p+1 when p is odd: a range from an even port to 65535
// has an even count, all of which connect() tries.
func evenUp(p int) int { return p + p%2 }

// portList: "8080, 50000".
func portList(ports []int) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ", ")
}
