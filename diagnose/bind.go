package diagnose

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// bind EADDRINUSE: port 0 found no free port, or another socket holds the
// address and port.
func (d *Diagnoser) bindInUse(ev *decode.Event, g *Diagnosis, p *portScene) {
	want := ev.Local.IP
	proto := protoOf(ev)
	if want.Port() == 0 {
		p.bind = true
		r := portmodel.BindPort0(p.sc, p.socks, want.Addr(), proto, false)
		d.fillBudget(g, p, r)
		what := "for bind() to port 0"
		if proto == portmodel.UDP {
			what = "for a UDP bind() to port 0"
		}
		d.portVerdict(g, p, r, udpGroups(p, r, groupBind(p, r), proto), what)
		return
	}
	conflicts, unsure := portmodel.BindConflicts(p.socks, want, proto, false, false, 0)
	g.Source = p.source
	if len(conflicts) == 0 && len(unsure) > 0 {
		g.Cause = CauseUnsure
		g.States = p.stateCounts(unsure)
		g.Holders = d.holders(p.ns, p.inodesOf(unsure))
		g.Verdict = fmt.Sprintf("%s is used by sockets whose options could not be read (%s%s; %s): whether they block this bind() cannot be told", want, countsString(g.States), holderWords(g), p.source)
		return
	}
	if len(conflicts) == 0 {
		g.Cause = CauseNotExhausted
		g.Verdict = fmt.Sprintf("%s is free now: whatever held it is gone", want)
		return
	}
	g.Cause = CausePortTaken
	g.States = p.stateCounts(conflicts)
	g.Holders = d.holders(p.ns, p.inodesOf(conflicts))
	g.Verdict = fmt.Sprintf("%s is taken (%s%s)", want, countsString(g.States), holderWords(g))
	g.Fix = append(g.Fix, takenFix(p, conflicts, g))
}

// takenFix: SO_REUSEADDR only where the kernel would then let the bind()
// through (portmodel.ReuseAddrHelps), else the holder.
func takenFix(p *portScene, conflicts []int, g *Diagnosis) string {
	helps, known := portmodel.ReuseAddrHelps(p.socks, conflicts)
	if helps {
		return "set SO_REUSEADDR on the socket before bind(): the sockets in the way allow it (TIME_WAIT of an earlier instance, or sockets that set it and do not listen)"
	}
	if allTimeWait(p, conflicts) && known {
		return "only TIME_WAIT of closed connections holds the port, and their socket did not set SO_REUSEADDR, so setting it on the new socket alone would not help: set SO_REUSEADDR on the listening socket before bind() (then a restart binds over the TIME_WAITs it leaves), or wait for them to end (60 s)"
	}
	who := "the other holder"
	if len(g.Holders) > 0 {
		who = fmt.Sprintf("pid %d (%s)", g.Holders[0].PID, g.Holders[0].Comm)
	}
	if !known {
		return fmt.Sprintf("stop %s or choose another port (whether SO_REUSEADDR would help cannot be told: the sockets' options were not read, %s)", who, p.source)
	}
	return fmt.Sprintf("stop %s or choose another port; SO_REUSEADDR would not help: a socket in the way listens or did not set it", who)
}

func allTimeWait(p *portScene, idx []int) bool {
	for _, i := range idx {
		if p.socks[i].State != netdiag.StateTimeWait {
			return false
		}
	}
	return len(idx) > 0
}

// UDP: every port is one socket's, whatever its destination.
func udpGroups(p *portScene, r portmodel.Result, gs []portGroup, proto portmodel.Proto) []portGroup {
	if proto != portmodel.UDP {
		return gs
	}
	g := portGroup{cause: CauseUDPExhausted}
	for _, u := range r.Ports {
		if u.Why == portmodel.HeldForAll || u.Why == portmodel.FourTuple {
			g.ports++
			g.socks = append(g.socks, u.Sockets...)
		}
	}
	return []portGroup{g}
}

// connect EAGAIN on a UDP socket: its autobind found no port.
func (d *Diagnoser) udpConnect(ev *decode.Event, g *Diagnosis, p *portScene) {
	local := boundAddr(ev).Addr()
	if !local.IsValid() {
		// Not bound: the socket's address is its family's wildcard when
		// inet_autobind picks the port.
		local = netip.IPv4Unspecified()
		if ev.Family == unix.AF_INET6 {
			local = netip.IPv6Unspecified()
		}
	}
	r := portmodel.UDPAutobind(p.sc, p.socks, local)
	d.fillBudget(g, p, r)
	d.portVerdict(g, p, r, udpGroups(p, r, nil, portmodel.UDP), "for a UDP socket's port (connect() binds one)")
}

func protoOf(ev *decode.Event) portmodel.Proto {
	if ev.Protocol == 17 {
		return portmodel.UDP
	}
	return portmodel.TCP
}

// bind EADDRNOTAVAIL: the address is missing, or not usable yet.
func (d *Diagnoser) bindNotAvail(ev *decode.Event, g *Diagnosis, p *portScene) {
	if !d.addressProblem(ev.Local.IP.Addr(), g, p) {
		g.Cause = CauseNotExhausted
		g.Verdict = fmt.Sprintf("%s is configured and usable in this network namespace now: it was missing or not ready when bind() ran", ev.Local.IP.Addr())
	}
}

// loopbackIndex is lo's ifindex in every netns (LOOPBACK_IFINDEX).
const loopbackIndex = 1

// addressProblem checks a, the address a socket was bound to, against the
// netns's address list and flags. It fills the verdict and reports true
// only when the netns says what is wrong with a.
func (d *Diagnoser) addressProblem(a netip.Addr, g *Diagnosis, p *portScene) bool {
	addrs, err := p.ns.IfAddrs()
	if err != nil {
		g.Err = err.Error()
		return false
	}
	a = a.Unmap()
	var list []string
	for _, x := range addrs {
		list = append(list, x.Prefix.String())
		if x.Index == loopbackIndex && x.Prefix.Contains(a) && x.Prefix.Addr() != a {
			return false // a whole prefix on lo is local (127.0.0.5 with 127.0.0.1/8)
		}
		if x.Prefix.Addr() != a {
			continue
		}
		if x.Usable() {
			return false
		}
		g.Cause = CauseAddressNotReady
		g.Verdict = fmt.Sprintf("%s is configured but not usable yet: %s (IPv6 duplicate address detection has not finished, or failed)", a, x.FlagNames())
		g.Fix = append(g.Fix, "wait for the address to leave the tentative state before bind(), bind with IP_FREEBIND / IPV6_FREEBIND, or add it with nodad where duplicates cannot happen")
		return true
	}
	if a.IsUnspecified() {
		return false
	}
	g.Addresses = list
	g.Cause = CauseAddressMissing
	g.Verdict = fmt.Sprintf("%s is not configured in this network namespace; it has %s", a, strings.Join(list, ", "))
	g.Fix = append(g.Fix, "bind to one of the netns's addresses or to 0.0.0.0 / ::; a pod's IP changes when the pod is recreated")
	return true
}
