package top

import (
	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// NodeJSON is the node's budgets in a Snapshot (docs/top.md): the same
// SNAT rows as the table (at ShownAtPercent or more), the conntrack
// table's use, and why what is missing was not read.
type NodeJSON struct {
	ShownAtPercent   int        `json:"snat_shown_at_percent"`
	SNAT             []SNATJSON `json:"snat"`
	SNATUnknown      string     `json:"snat_unknown,omitempty"`
	SNATNotCounted   int        `json:"snat_not_counted,omitempty"` // entries toward destinations past those one read counts
	ConntrackEntries *uint64    `json:"conntrack_entries,omitempty"`
	ConntrackMax     *uint64    `json:"conntrack_max,omitempty"`
	ConntrackPercent *int       `json:"conntrack_percent,omitempty"`
	ConntrackUnknown string     `json:"conntrack_unknown,omitempty"`
}

// SNATJSON is one SNAT row: from Egress toward Destination, Entries of
// the Ports of the range RangeLo-RangeHi (Rule's; MASQUERADE's default
// when Rule is empty).
type SNATJSON struct {
	Egress      string           `json:"egress"`
	Destination string           `json:"destination"`
	Protocol    string           `json:"protocol"`
	Entries     int              `json:"entries"`
	Ports       int              `json:"ports"`
	Percent     int              `json:"percent"`
	RangeLo     int              `json:"range_lo"`
	RangeHi     int              `json:"range_hi"`
	Rule        string           `json:"rule,omitempty"`
	RandomFully bool             `json:"random_fully,omitempty"`
	Holders     []SNATHolderJSON `json:"holders"`
}

// SNATHolderJSON is one source's entries, its pod when one of this node
// has the address.
type SNATHolderJSON struct {
	Address string             `json:"address"`
	Entries int                `json:"entries"`
	Pod     *diagnose.CheckPod `json:"pod,omitempty"`
}

// nodeJSON is the newest sample's node budgets; nil when not asked.
func (m *Model) nodeJSON() *NodeJSON {
	s := m.last
	if s.Node == nil && s.NodeWhy == "" {
		return nil
	}
	j := &NodeJSON{ShownAtPercent: NodeShownAt(m.warn()), SNAT: []SNATJSON{}, SNATUnknown: s.NodeWhy}
	var ct *diagnose.ConntrackUse
	if s.Node != nil {
		ct, j.SNATNotCounted = s.Node.Conntrack, s.Node.Dropped
	}
	if ct == nil {
		j.ConntrackUnknown = "its use could not be read"
		if s.NodeWhy != "" {
			j.ConntrackUnknown = "not read: " + s.NodeWhy
		}
	} else {
		j.ConntrackEntries, j.ConntrackMax = ptr(ct.Count), ptr(ct.Max)
		if pct, ok := conntrackPercent(ct); ok {
			j.ConntrackPercent = ptr(pct)
		}
	}
	for _, b := range m.nodeSNAT() {
		j.SNAT = append(j.SNAT, snatJSON(&b))
	}
	return j
}

func snatJSON(b *diagnose.SNATBudget) SNATJSON {
	j := SNATJSON{Egress: b.Egress.String(), Destination: b.Dst.String(), Protocol: decode.ProtocolName(uint16(b.Proto)),
		Entries: b.Entries, Ports: b.Ports(), Percent: b.Percent(), RangeLo: b.Lo, RangeHi: b.Hi, Rule: b.Rule,
		RandomFully: b.RandomFully, Holders: []SNATHolderJSON{}}
	for _, h := range b.Holders {
		hj := SNATHolderJSON{Address: h.Addr.String(), Entries: h.Entries}
		if h.Pod != nil && h.Pod.Name != "" {
			hj.Pod = &diagnose.CheckPod{Name: h.Pod.Name, Namespace: h.Pod.Namespace, UID: h.Pod.UID}
		}
		j.Holders = append(j.Holders, hj)
	}
	return j
}
