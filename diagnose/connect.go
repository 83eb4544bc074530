package diagnose

import (
	"fmt"
	"net/netip"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// connect EADDRNOTAVAIL / EADDRINUSE: check the bound address first, then
// ask the port model whether a connect() toward the remote can find a
// port now, and which sockets are in the way.
func (d *Diagnoser) connect(ev *decode.Event, g *Diagnosis, p *portScene) {
	bound := boundAddr(ev)
	if bound.Addr().IsValid() && !bound.Addr().IsUnspecified() && ev.Errno == decode.EADDRNOTAVAIL {
		if d.addressProblem(bound.Addr(), g, p) {
			return
		}
	}
	dst := ev.Remote.IP
	src := p.sourceFor(bound.Addr(), dst.Addr())
	if bound.Port() != 0 {
		d.fourTuple(netip.AddrPortFrom(src, bound.Port()), dst, g, p)
		return
	}
	r := portmodel.Connect(p.sc, p.socks, src, dst)
	d.fillBudget(g, p, r)
	groups := groupPorts(p, r)
	what := fmt.Sprintf("toward %s", dst)
	d.portVerdict(g, p, r, groups, what)
}

// boundAddr is what the failing socket was bound to before the call
// (zero when the event does not know).
func boundAddr(ev *decode.Event) netip.AddrPort {
	if !ev.Local.Valid || ev.Local.Family == decode.AFUnix {
		return netip.AddrPort{}
	}
	return ev.Local.IP
}

// fillBudget copies the model's counts into the diagnosis.
func (d *Diagnoser) fillBudget(g *Diagnosis, p *portScene, r portmodel.Result) {
	g.Counted = true
	g.Usable = r.Tried
	g.Free = r.Free + r.TWReusable
	g.InUse = r.Tried - g.Free
	g.HeldAll = r.HeldForAll
	g.Exhausted = r.Exhausted
	g.Unsure = r.Unsure
	g.Source = p.source
	var all []int
	for _, u := range r.Ports {
		all = append(all, u.Sockets...)
	}
	g.States = p.stateCounts(all)
}

// portVerdict says whether the ports ran out and why, and the fixes.
func (d *Diagnoser) portVerdict(g *Diagnosis, p *portScene, r portmodel.Result, groups []portGroup, what string) {
	rng := rangeWords(p, r)
	switch {
	case r.Exhausted:
		g.Cause = groups[0].cause
		g.Holders = d.holders(p.ns, p.inodesOf(groups[0].socks))
		g.Verdict = fmt.Sprintf("ephemeral ports exhausted %s: none of the %d ports %s is free: %s%s%s",
			what, r.Tried, rng, groupsString(groups), holderWords(g), cutWords(p))
		d.fixes(g, p, groups)
	case r.Free == 0 && r.SomeCalls == 0 && r.Unsure == 0 && r.TWReusable > 0:
		d.youngTimeWait(g, p, r, groups, what, rng)
	case g.Free == 0 && r.Unsure > 0:
		g.Cause = CauseUnsure
		g.Verdict = fmt.Sprintf("cannot tell whether the ports ran out %s: no port of the %d %s is free by the sockets seen, but %d are held by sockets whose bind bucket could not be read (%s): if they were bound by connect(), they are free toward this destination",
			what, r.Tried, rng, r.Unsure, p.source)
	case p.cut > 0:
		g.Cause = CauseUnsure
		g.Verdict = fmt.Sprintf("cannot tell whether the ports ran out %s: %d of the %d ports %s are free by the sockets read, but the netns holds more sockets that matter here than eaddr keeps (it read %d and left %d)",
			what, g.Free, r.Tried, rng, len(p.socks), p.cut)
		return
	default:
		g.Cause = CauseNotExhausted
		g.Verdict = fmt.Sprintf("not exhausted %s now: %d of the %d ports %s are free (%s); the failure was real, so the sockets changed between it and this look, or the port was taken by a bind() meanwhile",
			what, g.Free, r.Tried, rng, groupsOrNone(groups))
	}
}

// youngTimeWait: every port is TIME_WAIT that may be reused now. A
// connect() failed all the same when they were younger than the reuse
// delay (tcp_twsk_unique): the range is used up by connections closed
// faster than the delay lets the kernel reuse them.
func (d *Diagnoser) youngTimeWait(g *Diagnosis, p *portScene, r portmodel.Result, groups []portGroup, what, rng string) {
	g.Cause = CauseTimeWait
	for i := range groups {
		if groups[i].cause == groupTWReusable {
			groups[i].cause = CauseTimeWait
		}
	}
	g.Verdict = fmt.Sprintf("ephemeral ports used up %s by TIME_WAIT: all %d ports %s are TIME_WAIT, which connect() may reuse only once the connection is older than %s; the failure came sooner, and a connect() now would reuse one",
		what, r.Tried, rng, delayWords(p))
	d.fixes(g, p, groups)
}

func groupsOrNone(gs []portGroup) string {
	if len(gs) == 0 {
		return "no socket in the way"
	}
	return "taken: " + groupsString(gs)
}

// rangeWords: "of 40000-40009" with what the kernel leaves out of it.
func rangeWords(p *portScene, r portmodel.Result) string {
	s := fmt.Sprintf("of %d-%d", p.sc.Lo, p.sc.Hi)
	if len(p.sc.Reserved) > 0 {
		s += fmt.Sprintf(" outside the reserved %s", spansString(p.sc.Reserved))
	}
	if n := p.usable(); n > r.Tried {
		s += fmt.Sprintf(" (the kernel tries an even count: %d of the %d unreserved)", r.Tried, n)
	}
	return s
}

// fourTuple: the socket was bound to an explicit source port, and that
// port toward the remote is used by another socket (the model's
// ConnectFromPort: __inet_check_established with no TIME_WAIT reuse
// pointer).
func (d *Diagnoser) fourTuple(local, dst netip.AddrPort, g *Diagnosis, p *portScene) {
	u := portmodel.ConnectFromPort(p.sc, p.socks, local, dst)
	g.Source = p.source
	tuple := fmt.Sprintf("%s:%d -> %s", addrWords(local.Addr()), local.Port(), dst)
	switch u.Why {
	case portmodel.FourTuple:
	case portmodel.Unsure:
		g.Cause = CauseUnsure
		g.Verdict = fmt.Sprintf("the socket was bound to port %d before connect(); whether %s is in use cannot be told: %s", local.Port(), tuple, u.Note)
		return
	default:
		g.Cause = CauseNotExhausted
		g.Verdict = fmt.Sprintf("the socket was bound to port %d before connect(); %s is free now: the socket that used it is gone", local.Port(), tuple)
		return
	}
	g.Cause = CauseFourTuple
	g.States = p.stateCounts(u.Sockets)
	g.Holders = d.holders(p.ns, p.inodesOf(u.Sockets))
	g.Verdict = fmt.Sprintf("the socket was bound to port %d before connect(), and %s is already used (%s%s)",
		local.Port(), tuple, countsString(g.States), holderWords(g))
	g.Fix = append(g.Fix, "do not bind() a fixed source port before connect() to a destination that port already talks to; bind port 0 with IP_BIND_ADDRESS_NO_PORT so the kernel picks a port free toward this destination")
}

func addrWords(a netip.Addr) string {
	if !a.IsValid() {
		return "*"
	}
	return a.String()
}
