package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// masqState is what the MASQUERADE audit reads in the host's netns.
type masqState struct {
	rules     []nodeport.Masquerade
	err       error
	nodePorts *nodeport.Table // kube-proxy's NodePort rules; nil when none could be read
	hostPorts []nodeport.HostPort
}

func readMasqState(ns *netdiag.Netns) masqState {
	var s masqState
	ns.Do(func() error {
		s.rules, s.err = nodeport.ReadMasquerade()
		s.nodePorts, _ = nodeport.Read()
		s.hostPorts, _, _ = nodeport.ReadHostPorts()
		return nil
	})
	return s
}

// auditHostMasquerade audits the MASQUERADE rules of r, the host's netns,
// entered again (the node walk reads its sockets without entering it).
func auditHostMasquerade(r *NetNSReport, o AuditOptions) {
	ns, err := o.open(r.Inode, r.PID)
	if err != nil {
		r.Add(SevInfo, "the node's MASQUERADE rules could not be read: cannot enter the netns: %v", err)
		return
	}
	defer ns.Close()
	auditMasquerade(r, readMasqState(ns), o.NodePortLo, o.NodePortHi)
}

// auditMasquerade: the host's MASQUERADE rules against the NodePort range
// and the hostPorts, as auditRange audits ip_local_port_range. MASQUERADE
// picks a source port from its range (1024-65535 without --to-ports)
// among those no conntrack entry toward the destination holds: it never
// looks at what listens or is forwarded on the node. Where the NodePorts
// are kube-proxy's iptables or nftables nat rules, which see only a
// flow's first packet, a reply to a masqueraded connection follows its
// conntrack entry past them (info); where nothing holds them (IPVS, an
// eBPF datapath: kubernetes#139276) the reply can be taken (warning).
func auditMasquerade(r *NetNSReport, s masqState, npLo, npHi int) {
	if s.err != nil {
		r.Add(SevInfo, "the node's MASQUERADE rules could not be read (nftables over netlink): %v", s.err)
		return
	}
	sev, where := masqSeverity(s.nodePorts)
	for _, m := range s.rules {
		lo, hi := m.Ports()
		n := min(hi, npHi) - max(lo, npLo) + 1
		if n <= 0 {
			continue
		}
		r.Add(sev, "MASQUERADE (%s) hands out node source ports %s, which overlap the NodePort range %d-%d in %d ports; %s. Fix: %s",
			masqName(m), masqRange(m), npLo, npHi, n, where, masqFix(m, npLo, npHi, s.hostPorts))
	}
	if hp := hostPortsIn(s.rules, s.hostPorts); len(hp) > 0 {
		r.Add(SevInfo, "MASQUERADE can hand out the hostPorts %s as source ports (CNI portmap's DNAT rules): a new connection from a destination that one of them was handed to is taken for that connection's reply", strings.Join(hp, ", "))
	}
}

// masqSeverity: how much an overlap matters with these NodePort rules.
func masqSeverity(t *nodeport.Table) (Severity, string) {
	ipvs, natRules := 0, 0
	if t != nil {
		for _, s := range t.Sources {
			switch s.Name {
			case nodeport.ModeIPVS:
				ipvs += s.Entries
			case nodeport.ModeNftables, nodeport.ModeIPTables:
				natRules += s.Entries
			}
		}
	}
	switch {
	case ipvs > 0:
		return SevWarning, "kube-proxy's NodePorts here are IPVS services, which take every packet to a NodePort, also the reply to a masqueraded connection that got that port"
	case natRules > 0:
		return SevInfo, "kube-proxy's NodePorts here are iptables/nftables nat rules, which see only a flow's first packet: replies follow their conntrack entry past them; on a datapath where nothing holds the NodePorts (IPVS, eBPF) replies would be taken"
	}
	return SevWarning, "eaddr found no kube-proxy NodePort rule of the iptables or nftables modes: on a datapath where nothing holds the NodePorts (IPVS, an eBPF kube-proxy replacement) the reply to a masqueraded connection that got one can be taken by the NodePort service (kubernetes#139276)"
}

func masqName(m nodeport.Masquerade) string {
	return fmt.Sprintf("%s table %s %s chain %s", ruleTool(m), m.Family, m.Table, m.Chain)
}

func masqRange(m nodeport.Masquerade) string {
	lo, hi := m.Ports()
	if m.Hi == 0 {
		return fmt.Sprintf("%d-%d (no --to-ports: the default)", lo, hi)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// masqFix gives the rule a range clear of the NodePort range: the
// kernel's ephemeral default 32768-60999 when it is, else the wider side;
// hostPorts inside it are named.
func masqFix(m nodeport.Masquerade, npLo, npHi int, hp []nodeport.HostPort) string {
	lo, hi := 32768, 60999
	if !(npHi < lo || npLo > hi) {
		lo, hi = npHi+1, 65535
		if npLo-1-1024 > hi-lo {
			lo, hi = 1024, npLo-1
		}
	}
	how := fmt.Sprintf("-j MASQUERADE --to-ports %d-%d (with -p tcp and -p udp)", lo, hi)
	if m.Mode == nodeport.ModeNftables {
		how = fmt.Sprintf("masquerade to :%d-%d", lo, hi)
	}
	if m.RandomFully {
		how += " keeping --random-fully"
	}
	s := fmt.Sprintf("give the rule a range clear of it: %s, %d ports (a range narrower than the connections to one destination at once runs out: each needs its own port)", how, hi-lo+1)
	var in []string
	for _, h := range hp {
		if int(h.Port) >= lo && int(h.Port) <= hi {
			in = append(in, fmt.Sprintf("%d", h.Port))
		}
	}
	if len(in) > 0 {
		s += "; the hostPorts " + strings.Join(slices.Compact(in), ", ") + " are inside it"
	}
	return s
}

// hostPortsIn lists the hostPorts some rule's range holds ("tcp/8080").
func hostPortsIn(rules []nodeport.Masquerade, hp []nodeport.HostPort) []string {
	var out []string
	for _, h := range hp {
		for _, m := range rules {
			if lo, hi := m.Ports(); int(h.Port) >= lo && int(h.Port) <= hi {
				out = append(out, decode.ProtocolName(uint16(h.Proto))+"/"+fmt.Sprint(h.Port))
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
