package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// The budgets of a count: the destinations holding the most first (a tie
// in a fixed order), each against the narrowest rule holding the ports
// chosen toward it (a span no rule holds: the default range, no rule
// named), its holders by entries with their pods named, and the Warning's
// note naming the share, the range, the holders and the fixes.
func TestSNATBudgets(t *testing.T) {
	egress := netip.MustParseAddr("198.18.0.1")
	key := func(dst string) nodeport.SNATKey {
		return nodeport.SNATKey{Proto: unix.IPPROTO_TCP, Egress: egress, Dst: netip.MustParseAddrPort(dst)}
	}
	busy, quiet, wide := key("198.18.0.2:8080"), key("198.18.0.3:443"), key("198.18.0.4:53")
	pod0, pod1 := netip.MustParseAddr("10.98.1.2"), netip.MustParseAddr("10.98.2.2")
	c := &nodeport.SNATCount{
		ByKey: map[nodeport.SNATKey]int{busy: 4, quiet: 1, wide: 1},
		Ports: map[nodeport.SNATKey][2]uint16{busy: {40000, 40003}, quiet: {40001, 40001}, wide: {5000, 5000}},
		BySource: map[nodeport.SNATSource]int{{SNATKey: busy, Src: pod1}: 1, {SNATKey: busy, Src: pod0}: 3,
			{SNATKey: quiet, Src: pod1}: 1, {SNATKey: wide, Src: pod0}: 1},
	}
	rules := []nodeport.Masquerade{{Mode: nodeport.ModeNftables, Family: "inet", Table: "eaddr_lab", Chain: "post", Lo: 40000, Hi: 40003},
		{Mode: nodeport.ModeIPTables, Family: "ip", Table: "nat", Chain: "POSTROUTING", Lo: 30000, Hi: 50000}}
	bs := SNATBudgets(c, rules, 2)
	if len(bs) != 2 || bs[0].Dst != busy.Dst || bs[1].Dst != quiet.Dst {
		t.Fatalf("budgets %+v: want the busy destination, then the tie broken by address (198.18.0.3 before .4)", bs)
	}
	b := bs[0]
	if b.Entries != 4 || b.Ports() != 4 || b.Percent() != 100 || b.Rule != "nft table inet eaddr_lab chain post" || b.Egress != egress {
		t.Errorf("busy budget %+v: want 4 of the nft rule's 4 ports from %s", b, egress)
	}
	if top := b.Top(); top == nil || top.Addr != pod0 || top.Entries != 3 || len(b.Holders) != 2 || b.Holders[1].Addr != pod1 {
		t.Errorf("holders %+v: want pod 0's 3 first, pod 1's 1", b.Holders)
	}
	if w := SNATBudgets(c, rules, 3)[2]; w.Lo != nodeport.DefaultMasqLo || w.Hi != nodeport.DefaultMasqHi || w.Rule != "" {
		t.Errorf("a port no rule holds: %+v, want the default range and no rule", w)
	}
	named := &decode.Pod{Namespace: "shop", Name: "client"}
	nameHolders(b.Holders, func(a netip.Addr) (*decode.Pod, bool) { return named, a == pod0 })
	verdict, fix := b.Warning()
	for _, want := range []string{"holds 4 of the 4 ports it can give from 198.18.0.1 toward 198.18.0.2:8080 (100%; 40000-40003, the range of nft table inet eaddr_lab chain post)",
		"entries by pod address: 10.98.1.2 (pod shop/client) 3, 10.98.2.2 1", "drops new connections' SYNs"} {
		if !strings.Contains(verdict, want) {
			t.Errorf("warning %q lacks %q", verdict, want)
		}
	}
	if len(fix) != 2 || !strings.HasPrefix(fix[0], "widen the MASQUERADE range (40000-40003") || !strings.HasSuffix(fix[1], ": 10.98.1.2 holds 3") {
		t.Errorf("fixes %q", fix)
	}
}
