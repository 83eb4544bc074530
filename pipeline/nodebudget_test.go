package pipeline

import (
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	got := budgetSeries(t, b)
	egress, dst := snatlab.NodeAddr(4).String(), snatlab.ServerDst(4)
	if e, p := got[snatSeries("eaddr_snat_entries", egress, dst)], got[snatSeries("eaddr_snat_ports", egress, dst)]; e != 4 || p != 4 {
		t.Errorf("eaddr_snat_entries %v of eaddr_snat_ports %v, want 4 of 4 (series %v)", e, p, got)
	}
	if s0, s1 := got[snatSeries("eaddr_snat_source_entries", egress, dst, "10.98.1.2", "lab", "pod0")],
		got[snatSeries("eaddr_snat_source_entries", egress, dst, "10.98.2.2", "", "")]; s0 != 3 || s1 != 1 {
		t.Errorf("shares: pod 0 %v, pod 1 %v; want 3 and 1 (series %v)", s0, s1, got)
	}
	if len(sink.got) != 1 || sink.got[0].PodUID != "u-0" || sink.got[0].Dest.String() != snatlab.ServerDst(4) {
		t.Fatalf("warnings %+v (%d unnamed): want one on pod 0 toward %s", sink.got, sink.unnamed, snatlab.ServerDst(4))
	}
	t.Logf("note: %s. Fix: %s", sink.got[0].Verdict, sink.got[0].Fix)
}

// A scrape sees one sample whole: during the next one (its read not
// done) the last one's series, every one of them; after it, the new
// sample's only (a destination gone from the top has no series left). A
// table not read keeps the SNAT series of the last sample and shows the
// table's use when that was read.
func TestNodeBudgetScrapeWhole(t *testing.T) {
	const eg = "198.18.0.1"
	budget := func(dst string, entries int) diagnose.SNATBudget {
		return diagnose.SNATBudget{Proto: unix.IPPROTO_TCP, Egress: netip.MustParseAddr(eg), Dst: netip.MustParseAddrPort(dst),
			Entries: entries, Lo: 40000, Hi: 40009, Holders: []diagnose.SNATHolder{{Addr: netip.MustParseAddr("10.98.1.2"), Entries: entries}}}
	}
	type result struct {
		nb  *diagnose.NodeBudgets
		err error
	}
	reads := make(chan result)
	b := newNodeBudget(1, 0, slog.New(slog.DiscardHandler))
	b.met = true
	b.read = func(uint64, int, func(netip.Addr) (*decode.Pod, bool)) (*diagnose.NodeBudgets, error) {
		r := <-reads
		return r.nb, r.err
	}
	sample := func() chan struct{} {
		done := make(chan struct{})
		go func() { b.sampled(nil); close(done) }()
		return done
	}
	if got := budgetSeries(t, b); len(got) != 0 {
		t.Fatalf("before any sample: %v, want no series", got)
	}
	first := &diagnose.NodeBudgets{SNAT: []diagnose.SNATBudget{budget("198.18.0.2:443", 9), budget("198.18.0.3:443", 2)},
		Conntrack: &diagnose.ConntrackUse{Count: 11, Max: 100}}
	done := sample()
	reads <- result{nb: first}
	<-done
	whole := budgetSeries(t, b)
	if len(whole) != 8 || whole[snatSeries("eaddr_snat_entries", eg, "198.18.0.3:443")] != 2 {
		t.Fatalf("first sample: %v, want 2 destinations with entries, ports and a source each, and the table's use", whole)
	}
	done = sample() // the second sample's read has not returned
	if got := budgetSeries(t, b); !maps.Equal(got, whole) {
		t.Errorf("mid-sample: %v, want the first sample whole: %v", got, whole)
	}
	reads <- result{nb: &diagnose.NodeBudgets{SNAT: []diagnose.SNATBudget{budget("198.18.0.2:443", 10)}, Conntrack: &diagnose.ConntrackUse{Count: 12, Max: 100}}}
	<-done
	second := budgetSeries(t, b)
	want := map[string]float64{snatSeries("eaddr_snat_entries", eg, "198.18.0.2:443"): 10, snatSeries("eaddr_snat_ports", eg, "198.18.0.2:443"): 10,
		snatSeries("eaddr_snat_source_entries", eg, "198.18.0.2:443", "10.98.1.2", "", ""): 10, "eaddr_conntrack_entries": 12, "eaddr_conntrack_max": 100}
	if !maps.Equal(second, want) {
		t.Errorf("second sample: %v, want %v", second, want)
	}
	done = sample()
	reads <- result{nb: &diagnose.NodeBudgets{Conntrack: &diagnose.ConntrackUse{Count: 13, Max: 100}}, err: errors.New("dump interrupted")}
	<-done
	want["eaddr_conntrack_entries"] = 13
	if got := budgetSeries(t, b); !maps.Equal(got, want) {
		t.Errorf("after a table not read: %v, want the SNAT series kept and the use read: %v", got, want)
	}
}

// budgetSeries scrapes b's collectors: each series by its family's name
// and labels, as snatSeries writes them.
func budgetSeries(t *testing.T, b *nodeBudget) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			k := f.GetName()
			for _, l := range m.GetLabel() { // sorted by name
				k += " " + l.GetName() + "=" + l.GetValue()
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

// snatSeries is the key budgetSeries gives a SNAT series toward dst from
// egress (tcp), with a source's address, namespace and pod when given.
func snatSeries(name, egress, dst string, source ...string) string {
	k := name + " destination=" + dst + " egress=" + egress
	if len(source) == 3 {
		k += " namespace=" + source[1] + " pod=" + source[2]
	}
	k += " protocol=tcp"
	if len(source) == 3 {
		k += " source=" + source[0]
	}
	return k
}
