package top

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/output"
)

// The node's budgets (issue 37): above the netns, top shows the node's
// SNAT toward each destination whose MASQUERADE range is at NodeShownAt or
// more, and the conntrack table's use of its max, both read from the
// node's netns once per sample (Sampler.NodeBudgets). Nothing is shown
// while neither is at that share; what could not be read is said in the
// header, once.

// NodeBudgetsRead is how many destinations a sample reads
// (diagnose.ReadNodeBudgets's top): it orders them by entries, not by
// share, so a narrow range nearly full can rank below a wide one; reading
// this many keeps it among them on any node but one with more busy
// destinations than that.
const NodeBudgetsRead = 64

// NodeShownAt is the share (percent) from which the node's SNAT toward a
// destination, or its conntrack table, gets a row: half of --warn, rounded
// up, so that it shows while there is still time; at --warn or more a SNAT
// row also gets its holders and the fix.
func NodeShownAt(warn int) int { return (max(warn, 1) + 1) / 2 }

// warn is m.Warn, or the default 80.
func (m *Model) warn() int {
	if m.Warn > 0 {
		return m.Warn
	}
	return 80
}

// nodeSNAT is the newest sample's SNAT budgets at NodeShownAt or more,
// the fullest first.
func (m *Model) nodeSNAT() []diagnose.SNATBudget {
	nb := m.last.Node
	if nb == nil {
		return nil
	}
	var out []diagnose.SNATBudget
	for _, b := range nb.SNAT {
		if b.Percent() >= NodeShownAt(m.warn()) {
			out = append(out, b)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Percent() > out[j].Percent() })
	return out
}

// conntrackPercent is c's count of its max; false when its max is unknown.
func conntrackPercent(c *diagnose.ConntrackUse) (int, bool) {
	if c == nil || c.Max == 0 {
		return 0, false
	}
	return int(c.Count * 100 / c.Max), true
}

// nodeHeader is the header's line about the node's budgets when they
// could not be read (all or part), or some destinations were not counted;
// none when they were, or not asked.
func (m *Model) nodeHeader() []string {
	s := m.last
	switch {
	case s.Node != nil && s.Node.Dropped > 0 && s.NodeWhy == "":
		return []string{fmt.Sprintf("node SNAT: %d entries toward destinations past the 4096 one read counts were not counted: one of those may be fuller than shown", s.Node.Dropped)}
	case s.NodeWhy != "" && (s.Node == nil || s.Node.Conntrack == nil):
		return []string{"node SNAT and conntrack: - (not read: " + s.NodeWhy + ")"}
	case s.NodeWhy != "":
		return []string{"node SNAT: - (not read: " + s.NodeWhy + ")"}
	case s.Node != nil && s.Node.Conntrack == nil:
		return []string{"node conntrack: - (its use could not be read)"}
	}
	return nil
}

// nodeColumns is the header row of the node's SNAT rows (docs/top.md).
var nodeColumns = []string{"NODE SNAT", "PROTO", "ENTRIES/PORTS", "OF RANGE", "RANGE", "MOST HELD BY"}

// nodeLines are the node's rows, before the netns: a title, a row per
// SNAT budget at NodeShownAt or more (under one at --warn, its holders and
// fix: under the first only with FirstDetails), the conntrack table's use;
// none when neither is at that share.
func (m *Model) nodeLines(h Header) []string {
	snat := m.nodeSNAT()
	ct := (*diagnose.ConntrackUse)(nil)
	if m.last.Node != nil {
		ct = m.last.Node.Conntrack
	}
	ctPct, ctOK := conntrackPercent(ct)
	at := NodeShownAt(m.warn())
	if len(snat) == 0 && (!ctOK || ctPct < at) {
		return nil
	}
	width := h.width()
	lines := output.Hanging("", fmt.Sprintf("node: SNAT toward a destination or conntrack at %d%% or more (half of --warn %d)", at, m.warn()), width)
	if len(snat) > 0 {
		cells := [][]string{nodeColumns}
		for i := range snat {
			cells = append(cells, snatCells(&snat[i]))
		}
		// no column gives way: an address cut would be another; the
		// holder, last, is cut at the width (its details and the JSON
		// have it whole)
		table := output.Columns(cells, width, len(nodeColumns), 0)
		lines = append(lines, table[0])
		shown := false
		for i := range snat {
			lines = append(lines, table[i+1])
			if snat[i].Percent() >= m.warn() && !(h.FirstDetails && shown) {
				lines = append(lines, snatDetails(&snat[i], width)...)
				shown = true
			}
		}
	}
	return append(lines, output.Hanging("", conntrackLine(ct), width)...)
}

// snatCells is b's row (raw: Columns makes it safe).
func snatCells(b *diagnose.SNATBudget) []string {
	rng := fmt.Sprintf("%d-%d", b.Lo, b.Hi)
	if b.Rule == "" {
		rng += " (default)"
	}
	most := "-"
	if top := b.Top(); top != nil {
		most = fmt.Sprintf("%s: %d", holderName(top), top.Entries)
	}
	return []string{b.Egress.String() + " -> " + b.Dst.String(), decode.ProtocolName(uint16(b.Proto)),
		fmt.Sprintf("%d/%d", b.Entries, b.Ports()), bar(b.Percent(), b.Entries >= b.Ports()), rng, most}
}

// holderName is the holder's pod (namespace/name) and address, or its
// address alone when no pod of this node is known to have it: never a
// guess.
func holderName(h *diagnose.SNATHolder) string {
	if h.Pod != nil && h.Pod.Name != "" {
		return h.Pod.Namespace + "/" + h.Pod.Name + " (" + h.Addr.String() + ")"
	}
	return h.Addr.String()
}

// snatDetails: every holder counted, and the fix, wrapped under labels.
func snatDetails(b *diagnose.SNATBudget, width int) []string {
	held := ""
	for i := range b.Holders {
		if i > 0 {
			held += ", "
		}
		held += holderName(&b.Holders[i]) + " " + strconv.Itoa(b.Holders[i].Entries)
	}
	if held == "" {
		held = "no source counted"
	}
	out := output.Hanging("  entries by source: ", held, width)
	_, fix := b.Warning()
	for _, f := range fix {
		out = append(out, output.Hanging("  fix: ", f, width)...)
	}
	return out
}

// conntrackLine is the conntrack table's use of its max.
func conntrackLine(c *diagnose.ConntrackUse) string {
	pct, ok := conntrackPercent(c)
	switch {
	case c == nil:
		return "conntrack: - (its use could not be read)"
	case !ok:
		return fmt.Sprintf("conntrack: %d entries, its max not known", c.Count)
	}
	return fmt.Sprintf("conntrack: %d of %d entries (%d%%; past its max, new flows are dropped)", c.Count, c.Max, pct)
}
