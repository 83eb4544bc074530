package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// The causes a diagnosis names (Diagnosis.Cause); docs/diagnoses.md lists
// each with its verdict, its fix and the test that makes it happen.
const (
	CausePerDestination    = "per_destination"     // ESTABLISHED (or connecting) sockets toward the destination
	CauseBindBeforeConnect = "bind_before_connect" // ports bound by bind() before connect(): held for every destination
	CauseBoundOnly         = "bound_only"          // sockets bound and never connected
	CauseListener          = "listener_in_range"   // a listener's port inside the range
	CauseCloseWait         = "close_wait_leak"     // the holder never closes after the peer's FIN
	CauseOrphans           = "orphans"             // closed sockets waiting for the peer (FIN_WAIT*, LAST_ACK, CLOSING)
	CauseTimeWait          = "time_wait"           // TIME_WAIT that connect() may not reuse
	CauseFourTuple         = "four_tuple"          // an explicit source port whose 4-tuple is in use
	CauseAddressMissing    = "address_missing"     // the bound address is not in the netns
	CauseAddressNotReady   = "address_not_ready"   // listed, but tentative or failed duplicate address detection
	CauseUDPExhausted      = "udp_exhausted"       // UDP sockets bound on every port
	CausePortTaken         = "port_taken"          // bind() to a port another socket holds
	CauseNotExhausted      = "not_exhausted_now"   // the model finds free ports now: the sockets changed since
	CauseUnsure            = "unsure"              // sockets whose bind bucket could not be read
)

// portGroup is the ports of one cause, with the sockets in the way.
type portGroup struct {
	cause string
	ports int
	socks []int // indexes into the scene's sockets
}

// groupPorts sorts the ports the model found taken into causes, the
// largest first.
func groupPorts(p *portScene, r portmodel.Result) []portGroup {
	return groupBy(p, r, causeOf)
}

// groupBind sorts the ports a bind() to port 0 found taken: any socket on
// a port conflicts, so the sockets' states say whose doing it is.
func groupBind(p *portScene, r portmodel.Result) []portGroup {
	return groupBy(p, r, func(p *portScene, u portmodel.PortUse) string {
		switch u.Why {
		case portmodel.HeldForAll, portmodel.FourTuple:
			if c := heldForAllCause(p, u.Sockets); c != CauseBindBeforeConnect {
				return c
			}
			return stateCause(p, u.Sockets)
		case portmodel.Unsure:
			return CauseUnsure
		}
		return ""
	})
}

func groupBy(p *portScene, r portmodel.Result, causeOf func(*portScene, portmodel.PortUse) string) []portGroup {
	byCause := map[string]*portGroup{}
	for _, u := range r.Ports {
		c := causeOf(p, u)
		if c == "" {
			continue
		}
		g := byCause[c]
		if g == nil {
			g = &portGroup{cause: c}
			byCause[c] = g
		}
		g.ports++
		g.socks = append(g.socks, u.Sockets...)
	}
	out := make([]portGroup, 0, len(byCause))
	for _, g := range byCause {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ports != out[j].ports {
			return out[i].ports > out[j].ports
		}
		return out[i].cause < out[j].cause
	})
	return out
}

// causeOf names why one port is taken, from the sockets in its way.
func causeOf(p *portScene, u portmodel.PortUse) string {
	switch u.Why {
	case portmodel.HeldForAll:
		return heldForAllCause(p, u.Sockets)
	case portmodel.FourTuple:
		return stateCause(p, u.Sockets)
	case portmodel.Unsure:
		return CauseUnsure
	case portmodel.TimeWaitReusable:
		return groupTWReusable
	}
	return ""
}

// groupTWReusable groups TIME_WAIT ports that connect() may reuse now: not
// in the way, unless they were younger than the reuse delay at the failure.
const groupTWReusable = "time_wait_reusable"

func heldForAllCause(p *portScene, idx []int) string {
	cause := CauseBindBeforeConnect
	for _, i := range idx {
		switch p.socks[i].State {
		case netdiag.StateListen:
			return CauseListener
		case netdiag.StateClose:
			cause = CauseBoundOnly
		}
	}
	return cause
}

// stateCause: a 4-tuple is taken by a socket in some state; the state says
// whose doing it is.
func stateCause(p *portScene, idx []int) string {
	if len(idx) == 0 {
		return CauseUnsure
	}
	switch p.socks[idx[0]].State {
	case netdiag.StateCloseWait:
		return CauseCloseWait
	case netdiag.StateFinWait1, netdiag.StateFinWait2, netdiag.StateLastAck, netdiag.StateClosing:
		return CauseOrphans
	case netdiag.StateTimeWait:
		return CauseTimeWait
	}
	return CausePerDestination
}

// causeWords is how a verdict names a group of ports.
func causeWords(c string) string {
	switch c {
	case CausePerDestination:
		return "held by open connections"
	case CauseUDPExhausted:
		return "bound by UDP sockets"
	case CauseBindBeforeConnect:
		return "held for every destination: their sockets bind() before connect()"
	case CauseBoundOnly:
		return "held for every destination by sockets bound and never connected"
	case CauseListener:
		return "held for every destination by listeners inside the range"
	case CauseCloseWait:
		return "in CLOSE_WAIT: the peer closed, the holder never did"
	case CauseOrphans:
		return "closed by their program, waiting for the peer to close (FIN_WAIT2, LAST_ACK, CLOSING)"
	case CauseTimeWait:
		return "in TIME_WAIT that connect() may not reuse"
	case groupTWReusable:
		return "in TIME_WAIT that connect() may reuse now"
	case CauseUnsure:
		return "held by sockets whose bind bucket could not be read"
	}
	return c
}

// groupsString: "6 ports in CLOSE_WAIT: ..., 4 ports held for ...".
func groupsString(gs []portGroup) string {
	parts := make([]string, 0, len(gs))
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%d %s", g.ports, causeWords(g.cause)))
	}
	return strings.Join(parts, "; ")
}
