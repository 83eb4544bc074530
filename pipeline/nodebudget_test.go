package pipeline

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/kubeevent"
)

// Of a sample's SNAT budgets, one at --warn or above is a Warning Event on
// the pod holding the most of it, toward its destination; one below is
// none; one whose top holder is no pod eaddr knows by name is counted as a
// warning that reached no Event, never put on the next holder (a named
// pod) instead.
func TestNodeBudgetWarnings(t *testing.T) {
	web := &decode.Pod{UID: "u-web", Name: "web", Namespace: "shop"}
	other := &decode.Pod{UID: "u-other", Name: "other", Namespace: "shop"}
	holder := func(a string, n int, p *decode.Pod) diagnose.SNATHolder {
		return diagnose.SNATHolder{Addr: netip.MustParseAddr(a), Entries: n, Pod: p}
	}
	budget := func(dst string, entries int, hs ...diagnose.SNATHolder) diagnose.SNATBudget {
		return diagnose.SNATBudget{Proto: unix.IPPROTO_TCP, Egress: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddrPort(dst),
			Entries: entries, Lo: 40000, Hi: 40009, Holders: hs}
	}
	nb := &diagnose.NodeBudgets{SNAT: []diagnose.SNATBudget{
		budget("198.18.0.2:443", 9, holder("10.98.2.2", 3, other), holder("10.98.1.2", 6, web)), // holders out of order: Top is [0]
		budget("198.18.0.3:443", 7, holder("10.98.1.2", 7, web)),
		budget("198.18.0.4:443", 10, holder("10.98.9.9", 8, nil), holder("10.98.1.2", 2, web)),
	}}
	nb.SNAT[0].Holders[0], nb.SNAT[0].Holders[1] = nb.SNAT[0].Holders[1], nb.SNAT[0].Holders[0]
	sink := &fakeSink{}
	b := newNodeBudget(1, 0, slog.New(slog.DiscardHandler))
	b.k, b.warn = sink, 80
	b.read = func(uint64, int, func(netip.Addr) (*decode.Pod, bool)) (*diagnose.NodeBudgets, error) { return nb, nil }
	b.sampled(nil)
	if len(sink.got) != 1 || sink.unnamed != 1 {
		t.Fatalf("warnings %+v, %d unnamed: want one (198.18.0.2:443, 90%%) and one unnamed (198.18.0.4:443's top holder)", sink.got, sink.unnamed)
	}
	f := sink.got[0]
	if f.PodUID != "u-web" || f.PodName != "web" || f.Namespace != "shop" || f.Reason != kubeevent.ReasonNodeSNATNearlyExhausted ||
		f.Dest != netip.MustParseAddrPort("198.18.0.2:443") || f.Count != 1 {
		t.Errorf("warning %+v: want pod shop/web's toward 198.18.0.2:443", f)
	}
	if !strings.Contains(f.Verdict, "holds 9 of the 10 ports") || !strings.Contains(f.Fix, "10.98.1.2 holds 6") {
		t.Errorf("note %q / %q", f.Verdict, f.Fix)
	}
}

// In issue 37's lab (the node's MASQUERADE narrowed to 4 ports, pod 0
// holding 3 toward the server, pod 1 one): one sample reads the node's
// table, sets each pod's share on eaddr_snat_source_entries and puts the
// Warning Event on pod 0, the one holding the most.
func TestNodeBudgetLab(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40003})
	l.Sandbox(t)
	l.Hold(t, 0, 3, 4)
	l.Hold(t, 1, 1, 4)
	pod0 := &decode.Pod{UID: "u-0", Name: "pod0", Namespace: "lab"}
	sink := &fakeSink{}
	b := newNodeBudget(l.Node.Inode(), 0, slog.New(slog.DiscardHandler))
	b.met, b.k, b.warn = true, sink, 80
	b.podOf = func(a netip.Addr) (*decode.Pod, bool) { return pod0, a == snatlab.PodAddr(0, 4) }
	b.sampled(nil)
	key := []string{snatlab.NodeAddr(4).String(), snatlab.ServerDst(4), "tcp"}
	share := func(src, ns, pod string) float64 {
		return gaugeValue(b.sources.WithLabelValues(append(key, src, ns, pod)...))
	}
	if e, p := gaugeValue(b.entries.WithLabelValues(key...)), gaugeValue(b.ports.WithLabelValues(key...)); e != 4 || p != 4 {
		t.Errorf("eaddr_snat_entries %v of eaddr_snat_ports %v, want 4 of 4", e, p)
	}
	if s0, s1 := share("10.98.1.2", "lab", "pod0"), share("10.98.2.2", "", ""); s0 != 3 || s1 != 1 {
		t.Errorf("shares: pod 0 %v, pod 1 %v; want 3 and 1", s0, s1)
	}
	if len(sink.got) != 1 || sink.got[0].PodUID != "u-0" || sink.got[0].Dest.String() != snatlab.ServerDst(4) {
		t.Fatalf("warnings %+v (%d unnamed): want one on pod 0 toward %s", sink.got, sink.unnamed, snatlab.ServerDst(4))
	}
	t.Logf("note: %s. Fix: %s", sink.got[0].Verdict, sink.got[0].Fix)
}
