package diagnose

import (
	"testing"

	"github.com/eaddr/eaddr/decode"
)

// TestLayerOfDrop: the layer from what a drop says, without root: where
// it was freed, its conntrack entry, the counters that moved.
func TestLayerOfDrop(t *testing.T) {
	nf := decode.NodeDrop{Reason: "NETFILTER_DROP"}
	snat := nf
	snat.HasCT, snat.SrcNAT = true, true
	ctOnly := nf
	ctOnly.HasCT = true
	for _, c := range []struct {
		name string
		f    FlowDrops
		want string
	}{
		{"another reason", FlowDrops{First: decode.NodeDrop{Reason: "IP_RPFILTER"}}, CauseNodeOther},
		{"an nftables verdict", FlowDrops{First: snat, Where: "nft_do_chain"}, CauseNodeRule},
		{"refused at confirm after SNAT", FlowDrops{First: snat, Where: "nf_hook_slow"}, CauseNodeSNAT},
		{"SNAT, no symbol, insert_failed moved", FlowDrops{First: snat, Counted: 1, InsertFailed: 1, CTDrop: 1}, CauseNodeSNAT},
		{"no SNAT, insert_failed moved", FlowDrops{First: ctOnly, Counted: 2, InsertFailed: 2, CTDrop: 2}, CauseConntrackRefused},
		{"no entry, drop alone moved", FlowDrops{First: nf, Where: "nf_hook_slow", Counted: 1, CTDrop: 1}, CauseConntrackFull},
		{"no counter moved (legacy iptables)", FlowDrops{First: nf, Where: "nf_hook_slow", Counted: 1}, CauseNodeRule},
		{"nothing known", FlowDrops{First: nf}, CauseNodeNetfilter},
		{"a confirmed entry is no SNAT refusal", FlowDrops{First: decode.NodeDrop{Reason: "NETFILTER_DROP", HasCT: true, SrcNAT: true, Confirmed: true}, Where: "nf_hook_slow"}, CauseNodeNetfilter},
	} {
		if got := c.f.layer(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
