package diagnose

import (
	"fmt"
	"net/netip"

	"github.com/eaddr/eaddr/decode"
)

// nodeVerdict writes the verdict and the fixes of the layer g.Cause names.
func nodeVerdict(g *Diagnosis, f FlowDrops, flow decode.Flow) {
	n := g.Node
	dropped := fmt.Sprintf("dropped its SYN %s (%s%s)", times(f.N), dropWords(n), countersWords(n, f))
	switch g.Cause {
	case CauseNodeSNAT:
		snatVerdict(g, n.SNAT, dropped)
	case CauseConntrackFull:
		use := "its entries and max could not be read"
		if c := n.Conntrack; c != nil {
			use = fmt.Sprintf("%d entries of nf_conntrack_max %d", c.Count, c.Max)
		}
		g.Verdict = fmt.Sprintf("the node's conntrack table is full (%s): conntrack could make no entry for this connection and %s", use, dropped)
		g.Fix = append(g.Fix, conntrackFullFixes(n.Conntrack)...)
	case CauseConntrackRefused:
		g.Verdict = "the node's conntrack refused this connection's entry (insert_failed): an entry with the same tuples was inserted first, and it " + dropped
		g.Fix = append(g.Fix, "conntrack -S in the node's netns shows insert_failed and clash_resolve by CPU; with no NAT in the way this is a race of two flows with the same tuples (retransmissions of one client): retrying the connection is safe")
	case CauseNodeRule:
		g.Verdict = "a firewall rule of the node " + dropped + "; conntrack did not drop it"
		g.Fix = append(g.Fix, fmt.Sprintf("find the rule that drops tcp from %s to %s in the node's netns: nft list ruleset | grep -n -w drop (iptables-save | grep -w DROP for iptables); a NetworkPolicy's rules are its CNI's: allow the flow or correct the policy", flow.Src.Addr(), flow.Dst))
	case CauseNodeOther:
		g.Verdict = "the node " + dropped
		g.Fix = append(g.Fix, otherDropFix(n))
	default:
		g.Verdict = "netfilter on the node " + dropped + "; eaddr cannot tell whether conntrack or a rule did"
		g.Fix = append(g.Fix, "in the node's netns, conntrack -S (insert_failed, drop by CPU) says whether conntrack dropped it, nft list ruleset (iptables-save) which rule could have")
	}
}

// countersWords: "; insert_failed +2, drop +2" when the counters were read
// around the drops.
func countersWords(n *NodeLayer, f FlowDrops) string {
	if !n.CountersKnown {
		if f.CountersErr != "" {
			return "; conntrack's counters not read: " + f.CountersErr
		}
		return ""
	}
	over := ""
	if f.Counted < f.N { // the first drop in a netns has no read before it
		over = fmt.Sprintf(" (read around %d of the %d drops)", f.Counted, f.N)
	}
	return fmt.Sprintf("; conntrack's insert_failed +%d, drop +%d%s", n.InsertFailed, n.CTDrop, over)
}

// snatVerdict: the node's SNAT had no free port toward the destination
// (all its range held: exhausted) or picked one another connection was
// taking (a clash), and the fixes for each, checked against the rule.
func snatVerdict(g *Diagnosis, s *SNATUse, dropped string) {
	head := fmt.Sprintf("the node's SNAT ran out of source ports toward %s: MASQUERADE chose %s, already taken, so conntrack refused this connection's entry and %s", s.Dst, s.Egress, dropped)
	if s.Lo == 0 || s.Err != "" && s.Entries == 0 {
		g.Verdict = head + "; eaddr could not read the SNAT's state: " + orNone(s.Err)
		g.Fix = append(g.Fix, "conntrack -L -d "+s.Dst.Addr().String()+" in the node's netns counts the entries holding its ports; widen the MASQUERADE range, give the node more egress addresses, or hold fewer connections to "+s.Dst.String()+" at once (keep-alive, a connection pool)")
		return
	}
	ports := s.Hi - s.Lo + 1
	g.Verdict = fmt.Sprintf("%s; %d conntrack entries hold ports of %s toward %s, and MASQUERADE's range %d-%d (%s) has %s", head, s.Entries, s.Egress.Addr(), s.Dst, s.Lo, s.Hi, s.Rule, portCount(ports))
	if len(s.Holders) > 0 {
		g.Verdict += "; entries by pod address: " + holdersText(s.Holders)
	}
	if s.Entries < ports {
		g.Verdict += fmt.Sprintf("; %d of them are free now: MASQUERADE picked a port another connection was taking at the same moment (a clash)", ports-s.Entries)
		if !s.RandomFully {
			g.Fix = append(g.Fix, "add --random-fully to the MASQUERADE rule ("+s.Rule+"; nft: masquerade fully-random): each connection then draws its port at random, and two rarely draw the same")
		} else {
			g.Fix = append(g.Fix, "the rule has --random-fully already: clashes stay rare unless its range is nearly full; widen it")
		}
	}
	g.Fix = append(g.Fix, snatBudgetFixes(s.Dst, s.Lo, s.Hi, s.Holders)...)
}

// snatBudgetFixes: more ports toward dst (a wider range, more egress
// addresses), or fewer connections held toward it, naming who holds most.
func snatBudgetFixes(dst netip.AddrPort, lo, hi int, holders []SNATHolder) []string {
	var fix []string
	ports := hi - lo + 1
	if lo > 1024 || hi < 65535 {
		fix = append(fix, fmt.Sprintf("widen the MASQUERADE range (%d-%d, %s; without --to-ports it is 1024-65535, clear of the node's NodePorts and listeners: eaddr check audits it), or give the node more egress addresses: each has its own ports toward %s", lo, hi, portCount(ports), dst))
	} else {
		fix = append(fix, fmt.Sprintf("give the node more egress addresses (each has its own %s toward %s), or spread the connections over more destination addresses", portCount(ports), dst))
	}
	fewer := "hold fewer connections to " + dst.String() + " at once and reuse them (HTTP keep-alive, a connection pool) instead of one per request"
	if len(holders) > 0 {
		fewer += fmt.Sprintf(": %s holds %d", holders[0].Addr, holders[0].Entries)
	}
	return append(fix, fewer)
}

// conntrackFullFixes: raise the table's max with its hash table, or find
// who fills it.
func conntrackFullFixes(c *ConntrackUse) []string {
	max := "its max"
	next := "twice it"
	if c != nil && c.Max > 0 {
		max = fmt.Sprintf("%d", c.Max)
		next = fmt.Sprintf("%d", 2*c.Max)
	}
	return []string{
		fmt.Sprintf("raise net.netfilter.nf_conntrack_max on the node (now %s): sysctl -w net.netfilter.nf_conntrack_max=%s, and in /etc/sysctl.d; grow the hash table with it (echo N > /sys/module/nf_conntrack/parameters/hashsize, N about max/4) so lookups stay short", max, next),
		"find who fills it: conntrack -L in the node's netns, counted by source; short-lived connections (no keep-alive) and UDP (DNS) fill it fastest",
	}
}

// otherDropFix is where to look for a drop that was not netfilter's.
func otherDropFix(n *NodeLayer) string {
	switch n.Reason {
	case "IP_RPFILTER":
		return "the reverse path filter dropped it: the route back to the source is not through the device it came in on; check net.ipv4.conf.*.rp_filter and the node's routes"
	case "TC_INGRESS", "TC_EGRESS", "TC_DROP":
		return "a tc program (a CNI's datapath, e.g. Cilium's) dropped it: its policy or its own drop reason says why (cilium monitor --type drop, or the CNI's drop metrics)"
	case "QDISC_DROP":
		return "the device's queue was full: the node sends more than the link takes (tc -s qdisc)"
	case "NEIGH_FAILED", "NEIGH_QUEUEFULL":
		return "the next hop did not answer ARP/ND: check the route and the gateway (ip neigh)"
	}
	return "the drop reason names the layer; dropwatch or perf trace -e skb:kfree_skb shows where"
}
