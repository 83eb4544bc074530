package diagnose

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// NodePortRules names the Service whose NodePort rule (kube-proxy's
// nftables, iptables or IPVS) catches traffic to a port of the node. A
// reader of the node's rules implements it; Diagnoser.NodePortRules nil
// means none is plugged in, which the diagnosis says.
type NodePortRules interface {
	// Find returns the Service (namespace/name:port) whose NodePort rule
	// catches proto (unix.IPPROTO_TCP, ...) traffic to addr:port (IPVS
	// matches the address too; an invalid addr matches any); ok is false
	// when no rule is known for it, or the rules could not be read.
	Find(proto uint8, addr netip.Addr, port uint16) (service string, ok bool)
}

// findRule is Find on a Diagnoser's rules, nil-safe: known is false when
// there is no reader.
func (d *Diagnoser) findRule(addr netip.Addr, port uint16) (service string, ok, known bool) {
	if d.NodePortRules == nil {
		return "", false, false
	}
	service, ok = d.NodePortRules.Find(unix.IPPROTO_TCP, addr, port)
	return service, ok, true
}

// socketErrno: a TCP/IP connect failed with what its handshake said, timed
// out or refused (not a unix socket's refusal).
func socketErrno(ev *decode.Event) bool {
	inet := ev.Remote.Family == decode.AFInet || ev.Remote.Family == decode.AFInet6
	return ev.Syscall == decode.Connect && !ev.NodePort && inet && (ev.Errno == int(unix.ETIMEDOUT) || ev.Errno == int(unix.ECONNREFUSED))
}

// nodePortSuspect: a timed-out or refused connect in the host netns (the
// node's daemons, kubelet, hostNetwork pods) whose source port is inside
// the NodePort range. Only there do kube-proxy's NodePort rules see the
// replies: a pod's replies go to the pod's own address.
func (d *Diagnoser) nodePortSuspect(ev *decode.Event) bool {
	if !socketErrno(ev) || !ev.Local.Valid || d.HostNetNS == 0 || uint64(ev.NetNS) != d.HostNetNS {
		return false
	}
	p := int(ev.Local.IP.Port())
	return p != 0 && p >= d.NodePortLo && p <= d.NodePortHi
}

// KeyOf is the snapshot key of ev, as the package's KeyOf, but false for a
// timed-out or refused connect that is no NodePort suspect, nor a timeout
// whose node drops are watched (nodeLayerSuspect). It reads only the
// Diagnoser's settings, so it may be called beside Diagnose.
func (d *Diagnoser) KeyOf(ev *decode.Event) (Key, bool) {
	key, ok := KeyOf(ev)
	if !ok || (socketErrno(ev) && !d.nodePortSuspect(ev) && !d.nodeLayerSuspect(ev)) {
		return key, false
	}
	return key, true
}

// nodePortFailure diagnoses a nodePortSuspect event: the reply to its
// source port was likely caught by a NodePort rule (a timeout), or could
// have been (a refusal, whose reply did arrive), and how to keep the
// host's source ports out of the NodePort range, checked against the
// netns's sysctls.
func (d *Diagnoser) nodePortFailure(ev *decode.Event, g *Diagnosis, now time.Time) {
	g.RemotePod = d.remotePod(ev)
	port := ev.Local.IP.Port()
	rng := fmt.Sprintf("%d-%d", d.NodePortLo, d.NodePortHi)
	rule := d.ruleText(ev.Local.IP.Addr(), port)
	if ev.Errno == int(unix.ETIMEDOUT) {
		g.Verdict = fmt.Sprintf("source port %d is inside the NodePort range %s in the host network namespace: the reply (SYN-ACK) to it was likely taken by a NodePort rule and sent to a Service backend, so the connection never completed (kube-proxy no longer holds NodePorts since Kubernetes 1.22); %s",
			port, rng, rule)
		g.Meaning = fmt.Sprintf("no answer reached the socket within net.ipv4.tcp_syn_retries: its source port %d is a NodePort of this node, and the destination's reply to it was likely caught by a NodePort rule on the way in; the destination may well have answered.", port)
	} else {
		g.Verdict = fmt.Sprintf("source port %d is inside the NodePort range %s in the host network namespace; this refusal reached the socket, so no NodePort rule took this reply, but the replies of any connection from such a port can be taken by one (timeouts, failed kubelet health checks); %s",
			port, rng, rule)
	}
	d.nodePortFixes(ev, g, now)
}

// nodePortFixes reads the netns's port sysctls and sockets into g and
// gives the fixes that keep its source ports out of the NodePort range,
// checked against them.
func (d *Diagnoser) nodePortFixes(ev *decode.Event, g *Diagnosis, now time.Time) {
	rng := fmt.Sprintf("%d-%d", d.NodePortLo, d.NodePortHi)
	ns, err := d.openNetns(ev, now)
	if err != nil {
		g.Err = fmt.Sprintf("network namespace %d: %v", ev.NetNS, err)
		g.Fix = append(g.Fix, "keep net.ipv4.ip_local_port_range clear of the NodePort range "+rng+" on the node (eaddr could not read the netns's range to check a fix: "+err.Error()+")")
		return
	}
	defer ns.Close()
	p, err := readPorts(ns, d.Iter, false, focus{}) // the ports it serves on
	if err != nil {
		g.Err = err.Error()
		g.Fix = append(g.Fix, "keep net.ipv4.ip_local_port_range clear of the NodePort range "+rng+" and of the node's listeners (eaddr could not read the netns's sysctls and sockets to check a fix: "+err.Error()+")")
		return
	}
	g.RangeLo, g.RangeHi, g.Usable = p.sc.Lo, p.sc.Hi, p.usable()
	g.Reserved = spansString(p.sc.Reserved)
	g.Fix = append(g.Fix, nodePortRangeFixes(p, d.NodePortLo, d.NodePortHi)...)
}

// rulesErr is why the rules reader read nothing, when it says.
func (d *Diagnoser) rulesErr() string {
	if e, ok := d.NodePortRules.(interface{ Err() error }); ok && e.Err() != nil {
		return e.Err().Error()
	}
	return ""
}

// ruleText says which NodePort rule catches replies to port, or that
// eaddr does not know.
func (d *Diagnoser) ruleText(addr netip.Addr, port uint16) string {
	service, ok, known := d.findRule(addr, port)
	switch {
	case ok:
		return fmt.Sprintf("the node has a NodePort rule for tcp/%d: %s", port, service)
	case known && d.rulesErr() != "":
		return fmt.Sprintf("eaddr could not read the node's NodePort rules (%s), so this is likely, not certain (look for tcp/%d: nft list ruleset | grep -w %d, iptables-save | grep -w %d, ipvsadm -Ln | grep -w %d)", d.rulesErr(), port, port, port, port)
	case known:
		return fmt.Sprintf("eaddr found no NodePort rule for tcp/%d, so this is likely, not certain", port)
	}
	return fmt.Sprintf("eaddr does not read the node's NodePort rules, so this is likely, not certain (look for tcp/%d: nft list ruleset | grep -w %d, iptables-save | grep -w %d, ipvsadm -Ln | grep -w %d)", port, port, port, port)
}

// nodePortRangeFixes is how the host keeps the source ports of p's netns
// out of the NodePort range [npLo, npHi], each fix checked: reserving the
// overlap only when ports of the range are left usable after it (a range
// inside the NodePort range would have none: then only moving it helps),
// and a range moved clear of it with the node's listeners inside it
// reserved.
func nodePortRangeFixes(p *portScene, npLo, npHi int) []string {
	sc := p.sc
	lo, hi := max(sc.Lo, npLo), min(sc.Hi, npHi)
	overlap := sc.Unreserved(npLo, npHi)
	if overlap == 0 {
		return []string{fmt.Sprintf("the range %d-%d (reserved: %s) no longer hands out ports of the NodePort range %d-%d: the port was chosen before a change, or by bind(); keep it so, also in /etc/sysctl.d",
			sc.Lo, sc.Hi, orNone(spansString(sc.Reserved)), npLo, npHi)}
	}
	move, canMove := clearRange(p, npLo, npHi)
	res := portSettings{reserved: mergeSpans(append(slices.Clone(sc.Reserved), portmodel.Span{Lo: lo, Hi: hi})), reserve: true}
	if left := res.ports(sc); left > 0 {
		few := ""
		if left < 1024 && canMove {
			few = ": few, moving the range is better"
		}
		fixes := []string{fmt.Sprintf("reserve the overlap %d-%d: %s: the list replaces the current one, leaving %s of %d-%d usable%s",
			lo, hi, owner{kind: ownerHost}.command(res), portCount(left), sc.Lo, sc.Hi, few)}
		if canMove {
			fixes = append(fixes, "or move the range clear of the NodePort range: "+move)
		}
		return fixes
	}
	why := fmt.Sprintf("reserving the overlap %d-%d would leave no usable port: the range %d-%d lies inside the NodePort range %d-%d", lo, hi, sc.Lo, sc.Hi, npLo, npHi)
	if !canMove {
		return []string{why + "; and no range of 1024 or more ports clear of it is left below 65536: change the NodePort range (kube-apiserver --service-node-port-range)"}
	}
	return []string{why + ": move the range instead: " + move}
}

// clearRange is the command for a range clear of [npLo, npHi] with at
// least 1024 usable ports once the node's listeners inside it are
// reserved: the wider part of the current range outside it, else the
// kernel's default (32768-60999) when it is clear, else the wider of
// 1024-(npLo-1) and (npHi+1)-65535; false when none is.
func clearRange(p *portScene, npLo, npHi int) (string, bool) {
	const minPorts = 1024
	sc := p.sc
	below, above := [2]int{sc.Lo, min(sc.Hi, npLo-1)}, [2]int{max(sc.Lo, npHi+1), sc.Hi}
	if above[1]-above[0] > below[1]-below[0] {
		below, above = above, below
	}
	cands := [][2]int{below, above}
	if npLo > 60999 || npHi < 32768 {
		cands = append(cands, [2]int{32768, 60999})
	}
	low, high := [2]int{minRangeLo, npLo - 1}, [2]int{npHi + 1, 65535}
	if low[1]-low[0] > high[1]-high[0] {
		cands = append(cands, low, high)
	} else {
		cands = append(cands, high, low)
	}
	for _, c := range cands {
		if c[0] < minRangeLo {
			continue
		}
		if plan, ok := hostRange(p, c[0], c[1]); ok && plan.gets >= minPorts {
			return fmt.Sprintf("%s gives %d ports (now %d)%s", owner{kind: ownerHost}.command(plan.set), plan.gets, p.usable(), plan.why), true
		}
	}
	return "", false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
