package pipeline

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/ports"
)

func portSeries(t *testing.T, p *portMetrics) (inUse, usable, all int) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, f := range fams {
		n[f.GetName()] = len(f.GetMetric())
	}
	return n["eaddr_ephemeral_ports_in_use"], n["eaddr_ephemeral_ports_usable"], n["eaddr_ephemeral_ports_held_for_all"]
}

func gaugeValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	(<-ch).Write(&m)
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

func dests(ports ...int) []diagnose.Destination {
	var out []diagnose.Destination
	for i, n := range ports {
		out = append(out, diagnose.Destination{Remote: "10.0.0." + string(rune('1'+i)) + ":80", Ports: n})
	}
	return out
}

// Series of a destination out of the top and of a netns gone are removed.
func TestPortSeriesRemoved(t *testing.T) {
	p := newPortMetrics(100, false)
	p.sampled(&ports.Sample{NetNS: []diagnose.NetNSReport{
		{Inode: 1, Host: true, Usable: 100, HeldForAll: 2, Destinations: dests(30, 20)},
		{Inode: 2, Pod: &diagnose.CheckPod{Namespace: "ns", Name: "web"}, Usable: 50, Destinations: dests(5)}}}, 0)
	if u, us, a := portSeries(t, p); u != 3 || us != 2 || a != 2 {
		t.Fatalf("series %d %d %d, want 3 2 2", u, us, a)
	}
	if v := gaugeValue(p.inUse.WithLabelValues("2", "ns", "web", "10.0.0.1:80")); v != 5 {
		t.Errorf("pod's in use %v, want 5", v)
	}
	// netns 2 went away; netns 1's second destination left its top.
	p.sampled(&ports.Sample{NetNS: []diagnose.NetNSReport{{Inode: 1, Host: true, Usable: 100, HeldForAll: 2, Destinations: dests(31)}}}, 0)
	if u, us, a := portSeries(t, p); u != 1 || us != 1 || a != 1 || p.series != 3 {
		t.Fatalf("series %d %d %d (%d counted), want 1 1 1 (3)", u, us, a, p.series)
	}
}

// Past the cap, series are not made, and what is cut is counted.
func TestPortSeriesCap(t *testing.T) {
	p := newPortMetrics(4, false)
	p.sampled(&ports.Sample{NetNS: []diagnose.NetNSReport{{Inode: 1, Usable: 100, Destinations: dests(30, 20, 10)}}}, 0)
	u, us, a := portSeries(t, p)
	if u+us+a != 4 {
		t.Errorf("%d series, want the cap 4", u+us+a)
	}
	if v := gaugeValue(p.cut); v != 1 {
		t.Errorf("cut %v, want 1", v)
	}
	// A destination leaving makes room again.
	p.sampled(&ports.Sample{NetNS: []diagnose.NetNSReport{{Inode: 1, Usable: 100, Destinations: dests(30, 20)}}}, 0)
	if u, _, _ := portSeries(t, p); u != 2 || gaugeValue(p.cut) != 1 {
		t.Errorf("%d in-use series, cut %v; want 2, 1", u, gaugeValue(p.cut))
	}
}

// Each event's diagnosis sets its netns's gauges: once the series exist,
// that allocates nothing (the metrics consumer is on the per-event path).
func TestPortMetricsDiagnosedDoesNotAllocate(t *testing.T) {
	p := newPortMetrics(100, false)
	ev := &decode.Event{Syscall: decode.Connect, NetNS: 4026531840}
	ev.Remote.IP = netip.MustParseAddrPort("10.0.0.1:8080")
	g := &diagnose.Diagnosis{Counted: true, Usable: 28232, InUse: 28232}
	p.diagnosed(ev, g)
	if n := testing.AllocsPerRun(1000, func() { p.diagnosed(ev, g) }); n != 0 {
		t.Errorf("a diagnosed event of a known destination allocates %v times", n)
	}
	if got := gaugeValue(p.inUse.WithLabelValues("4026531840", "", "", "10.0.0.1:8080")); got != 28232 {
		t.Errorf("in use toward 10.0.0.1:8080: %v, want 28232", got)
	}
}
