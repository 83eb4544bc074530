package diagnose

import (
	"fmt"
	"net/netip"
	"strings"
)

// fixes advises for the largest cause, then the others. Every fix is
// checked against the netns first: no setting that is already in effect, no
// reserve or range that would leave no port, no socket option that cannot
// work for the holders seen.
func (d *Diagnoser) fixes(g *Diagnosis, p *portScene, groups []portGroup) {
	for i, gr := range groups {
		if i == 2 {
			break
		}
		if f := d.causeFix(g, p, gr); f != "" {
			g.Fix = append(g.Fix, f)
		}
	}
	if f := d.rangeFix(p); f != "" {
		g.Fix = append(g.Fix, f)
	}
}

func (d *Diagnoser) causeFix(g *Diagnosis, p *portScene, gr portGroup) string {
	hs := d.holders(p.ns, p.inodesOf(gr.socks))
	switch gr.cause {
	case CausePerDestination:
		if p.bind {
			return fmt.Sprintf("%s on the range's ports; a bind() to port 0 needs a port no socket uses: if this socket binds only to connect(), set IP_BIND_ADDRESS_NO_PORT before bind() so its port is chosen at connect() and shared across destinations; else reuse connections", holdPhrase(hs, gr.ports, "open connections"))
		}
		return fmt.Sprintf("%s to this destination: reuse connections (HTTP keep-alive, a connection pool) instead of opening new ones", holdPhrase(hs, gr.ports, "connections"))
	case CauseBindBeforeConnect:
		return fmt.Sprintf("%s %s sockets before connect(): set IP_BIND_ADDRESS_NO_PORT before bind() (or do not bind), so the port is chosen at connect() and shared across destinations (Envoy upstream_bind_config, nginx proxy_bind, HAProxy source do this bind)", holderNames(hs), verb(hs, "binds its", "bind their"))
	case CauseBoundOnly:
		return fmt.Sprintf("%s bound to a port and never connected: close them, or set IP_BIND_ADDRESS_NO_PORT before bind()", holdPhrase(hs, gr.ports, "sockets"))
	case CauseListener:
		return d.listenerFix(p, gr)
	case CauseCloseWait:
		return fmt.Sprintf("%s %s sockets after the peer's FIN (%d in CLOSE_WAIT): a leak in the program, fix it to close() on end of stream; a wider range only delays the failure", holderNames(hs), verb(hs, "never closes its", "never close their"), gr.ports)
	case CauseOrphans:
		return fmt.Sprintf("the peer %s does not close its side: the kernel drops these orphans after net.ipv4.tcp_fin_timeout=%d s (FIN_WAIT2); find why the peer keeps them open", peerOf(p, gr), p.tcp.FinTimeout)
	case CauseTimeWait:
		return timeWaitFix(p, gr)
	case CauseUDPExhausted:
		return fmt.Sprintf("%s UDP sockets on every port: close unused ones, or send to many destinations from one socket (sendto) instead of one connected socket each", holderNames(hs)+" "+verb(hs, "holds", "hold"))
	}
	return ""
}

// holderNames names the holders of a group's sockets: "pid 7 (nc)", "pid 7
// (nc) and pid 9 (nc)", or what holds them when no process does.
func holderNames(hs []Holder) string {
	if len(hs) == 0 {
		return "a process that could not be found"
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = fmt.Sprintf("pid %d (%s)", h.PID, h.Comm)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// verb is one or other form, as one holder or several act.
func verb(hs []Holder, one, many string) string {
	if len(hs) > 1 {
		return many
	}
	return one
}

// holdPhrase: "pid 7 (nc) holds 2 connections", "pid 7 (nc) and pid 9 (nc)
// hold 2 connections", or "... hold 2 of the 3 connections" when the
// processes found hold fewer than the group has (a socket no process
// holds, or a holder past the three named): never more than was seen.
func holdPhrase(hs []Holder, n int, noun string) string {
	held := 0
	for _, h := range hs {
		held += h.Sockets
	}
	v := verb(hs, "holds", "hold")
	if len(hs) == 0 || held >= n {
		return fmt.Sprintf("%s %s %d %s", holderNames(hs), v, n, noun)
	}
	return fmt.Sprintf("%s %s %d of the %d %s", holderNames(hs), v, held, n, noun)
}

func peerOf(p *portScene, gr portGroup) string {
	if len(gr.socks) == 0 {
		return "peer"
	}
	return p.socks[gr.socks[0]].Remote.String()
}

// timeWaitFix follows the netns's own tcp_tw_reuse: never advise what is
// already in effect.
func timeWaitFix(p *portScene, gr portGroup) string {
	t := p.tcp
	delay := delayWords(p)
	loop := len(gr.socks) > 0 && loopbackPair(p.socks[gr.socks[0]].Local.Addr(), p.socks[gr.socks[0]].Remote.Addr())
	switch {
	case t.Timestamps == 0:
		return "TIME_WAIT ports are reused only for connections with TCP timestamps, and net.ipv4.tcp_timestamps=0 here: turn them on (1), or keep connections open"
	case t.TWReuse == 0 || (t.TWReuse == 2 && !loop):
		return fmt.Sprintf("net.ipv4.tcp_tw_reuse=1 in this netns (now %d) lets connect() reuse a TIME_WAIT port once the connection is older than %s; or let the server close first, or keep connections open", t.TWReuse, delay)
	}
	return fmt.Sprintf("TIME_WAIT reuse is already on here (net.ipv4.tcp_tw_reuse=%d), but a port is reused only once its connection is older than %s, and connections are opened and closed faster than that: keep connections open (a pool), or let the server close first", t.TWReuse, delay)
}

// delayWords: how old a TIME_WAIT must be before connect() reuses its port.
func delayWords(p *portScene) string {
	if p.tcp.TWReuseDelay >= 0 {
		return fmt.Sprintf("%d ms (net.ipv4.tcp_tw_reuse_delay)", p.tcp.TWReuseDelay)
	}
	return "1 s (fixed: this kernel has no tcp_tw_reuse_delay)"
}

// loopbackPair is tcp_twsk_unique's test for tcp_tw_reuse=2: a loopback
// source or destination.
func loopbackPair(a, b netip.Addr) bool {
	return a.Unmap().IsLoopback() || b.Unmap().IsLoopback()
}
