package diagnose

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
)

// The layers a timed-out connect()'s diagnosis names (Diagnosis.Cause),
// from the node's drops of its SYNs (DropBook); docs/diagnoses.md has each
// with its verdict, fix and test.
const (
	CauseNodeSNAT         = "node_snat"         // the node's SNAT found no free port toward the destination: conntrack refused the entry
	CauseConntrackFull    = "conntrack_full"    // the node's conntrack table was full: no entry could be made
	CauseConntrackRefused = "conntrack_refused" // conntrack refused the entry (insert_failed) with no SNAT done
	CauseNodeRule         = "node_rule"         // a firewall rule of the node dropped it
	CauseNodeNetfilter    = "node_netfilter"    // netfilter dropped it; which part of it is not certain
	CauseNodeOther        = "node_drop"         // dropped for another reason (rp_filter, tc, a full queue, a neighbour)
	CauseBeyondNode       = "beyond_node"       // no drop on the node: the SYNs left it
	CauseNodeMaybeMissed  = "node_unknown"      // no drop seen, but eaddr may have missed it
)

// NodeLayer is what the node did with a timed-out connection's SYNs.
type NodeLayer struct {
	Drops         int       // drops of its SYNs seen (0: none)
	First, Last   time.Time // of the drops
	NetNS         uint32    // the netns that dropped them
	InDevice      string    // the device they came in on there ("" for the host's own)
	Reason        string    // enum skb_drop_reason's name
	Where         string    // the kernel function that freed them; "" when not known
	CountersKnown bool      // InsertFailed and CTDrop were read around the drops
	InsertFailed  uint64    // how much conntrack's insert_failed moved with them
	CTDrop        uint64    // ... and its drop
	SNAT          *SNATUse
	Conntrack     *ConntrackUse
	WatchingSince time.Time // when eaddr began watching the node's drops
}

// SNATUse is the node's SNAT toward one destination, read at the diagnosis.
type SNATUse struct {
	Egress      netip.AddrPort // the node's address and the port MASQUERADE chose for the dropped SYN
	Dst         netip.AddrPort // the destination (after any DNAT)
	Entries     int            // conntrack entries holding a port of Egress's address toward Dst
	Lo, Hi      int            // the range of the MASQUERADE rule that chose it; 0 when none was read
	Rule        string         // which rule: "nft table inet eaddr_lab chain post", "iptables-nft table ip nat chain POSTROUTING"
	RandomFully bool
	Holders     []SNATHolder // by entries, most first (at most 8)
	Err         string       // what could not be read
}

// SNATHolder is one original source (a pod's address) of those entries.
type SNATHolder struct {
	Addr    netip.Addr
	Entries int
	Pod     *decode.Pod // nil: no pod known with that address
}

// ConntrackUse is the conntrack table of the dropping netns.
type ConntrackUse struct {
	Count, Max uint64
}

// nodeLayerSuspect: a TCP connect() that timed out, with the node's drops
// watched: the diagnosis names the layer that dropped its SYNs.
func (d *Diagnoser) nodeLayerSuspect(ev *decode.Event) bool {
	return d.NodeDrops != nil && socketErrno(ev) && ev.Errno == int(unix.ETIMEDOUT) && ev.Protocol == unix.IPPROTO_TCP &&
		ev.Local.Valid && ev.Local.IP.Port() != 0
}

// connectStart is when ev's connect() began, as far as eaddr knows: the
// asynchronous path says (also for an interrupted one); a blocking
// connect() is taken to have waited the longest the default
// tcp_syn_retries (6) makes it, 127 s.
func connectStart(ev *decode.Event) time.Time {
	if ev.Async || ev.Interrupted {
		return ev.Time.Add(-ev.AsyncAfter)
	}
	return ev.Time.Add(-127 * time.Second)
}

// dropsBehindWait is the longest a timeout's diagnosis waits for the
// node's drops to be read up to its failure: without them, "no drop on the
// node" would be a guess (it was, under load: "beyond the node" for drops
// not yet read).
const dropsBehindWait = 2 * time.Second

// nodeLayer diagnoses a nodeLayerSuspect event from the node's drops of
// its SYNs.
func (d *Diagnoser) nodeLayer(ev *decode.Event, g *Diagnosis) {
	flow := decode.Flow{Proto: uint8(ev.Protocol), Src: ev.Local.IP, Dst: ev.Remote.IP}
	current := d.NodeDrops.CurrentAt(ev.Time, dropsBehindWait)
	f, ok := d.NodeDrops.Lookup(flow)
	n := &NodeLayer{WatchingSince: d.NodeDrops.Since()}
	g.Node = n
	if !ok {
		d.noNodeDrop(ev, g, flow, current)
		return
	}
	n.Drops, n.First, n.Last = f.N, f.First.Time, f.Last
	n.NetNS, n.InDevice, n.Reason, n.Where = f.First.NetNS, f.InDev, f.First.Reason, f.Where
	n.CountersKnown, n.InsertFailed, n.CTDrop = f.Counted > 0, f.InsertFailed, f.CTDrop
	g.Cause = f.layer()
	if g.Cause == CauseNodeSNAT || g.Cause == CauseConntrackFull || g.Cause == CauseNodeNetfilter {
		d.readNodeState(f, n)
		if g.Cause == CauseNodeNetfilter && n.Conntrack != nil && full(n.Conntrack) && !f.First.HasCT {
			g.Cause = CauseConntrackFull
		}
	}
	g.Meaning = "no answer reached the socket within net.ipv4.tcp_syn_retries: this node dropped its SYNs before they left it, so the destination never saw them"
	nodeVerdict(g, f, flow)
}

// layer names the layer from what the drop itself says: where it was
// freed, the conntrack entry it had, and the counters that moved.
func (f FlowDrops) layer() string {
	d := f.First
	snatRefused := d.HasCT && !d.Confirmed && d.SrcNAT
	switch {
	case d.Reason != "NETFILTER_DROP":
		return CauseNodeOther
	case f.Where == "nft_do_chain":
		return CauseNodeRule // nftables (and iptables-nft) verdicts drop there
	case snatRefused && (f.Where == "nf_hook_slow" || f.Counted > 0 && f.InsertFailed > 0):
		// Past SNAT (priority 100) only conntrack's confirm (the last hook)
		// drops in nf_hook_slow: legacy iptables has no later table.
		return CauseNodeSNAT
	case d.HasCT && !d.Confirmed && f.Counted > 0 && f.InsertFailed > 0:
		return CauseConntrackRefused
	case !d.HasCT && f.Counted > 0 && f.CTDrop > 0 && f.InsertFailed == 0:
		return CauseConntrackFull
	case f.Counted > 0 && f.CTDrop == 0 && f.InsertFailed == 0:
		return CauseNodeRule // conntrack did not drop it: a legacy iptables rule
	}
	return CauseNodeNetfilter
}

// full: the table is at its max (a full table refuses above it).
func full(c *ConntrackUse) bool { return c.Max > 0 && c.Count >= c.Max }

// noNodeDrop: none of the connection's SYNs was dropped on this host, as
// far as eaddr watched.
func (d *Diagnoser) noNodeDrop(ev *decode.Event, g *Diagnosis, flow decode.Flow, current bool) {
	start := connectStart(ev)
	since := d.NodeDrops.Since()
	switch {
	case !current:
		g.Cause = CauseNodeMaybeMissed
		g.Verdict = fmt.Sprintf("eaddr had not yet read the node's drops up to this failure (its reader of them was still behind after %v: a busy node or a flood of drops): not known whether the node or something beyond it dropped the SYNs",
			dropsBehindWait)
	case since.After(start):
		g.Cause = CauseNodeMaybeMissed
		g.Verdict = fmt.Sprintf("eaddr saw no drop of this connection's SYNs on this host, but it began watching at %s, after the connect() may have begun: not known whether the node or something beyond it dropped them",
			since.UTC().Format(time.TimeOnly))
	case d.NodeDrops.MissedSince(start):
		g.Cause = CauseNodeMaybeMissed
		g.Verdict = "eaddr saw no drop of this connection's SYNs on this host, but it held back or lost some of the node's drops while the connect() waited (the rate limit, a full ring): not known whether the node dropped them"
	default:
		g.Cause = CauseBeyondNode
		g.Verdict = fmt.Sprintf("the SYNs left the node: no network namespace of this host dropped one of %s -> %s (eaddr watches netfilter, rp_filter, tc, queue and neighbour drops), so the loss is beyond the node: the destination did not answer, or a firewall or NAT on the way dropped them",
			flow.Src, flow.Dst)
		g.Fix = append(g.Fix, fmt.Sprintf("check that %s answers from the node (nc -vz -w 3 %s %d) and the firewalls on the way", flow.Dst, flow.Dst.Addr(), flow.Dst.Port()),
			"a cloud NAT has its own budget per destination (AWS NAT gateway about 55,000 connections: ErrorPortAllocation; GCP Cloud NAT: OUT_OF_RESOURCES; Azure: SnatPortExhaustion): look at its metrics")
	}
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// dropWords: "NETFILTER_DROP in nf_hook_slow, netns 4026532383, in from pod2".
func dropWords(n *NodeLayer) string {
	s := n.Reason
	if n.Where != "" {
		s += " in " + n.Where
	}
	s += fmt.Sprintf(", netns %d", n.NetNS)
	if n.InDevice != "" {
		s += ", in from " + n.InDevice
	}
	return s
}
