package pipeline

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
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
	p.sampled(&PortSample{NetNS: []NetNSPorts{
		{Inode: 1, Host: true, Usable: 100, HeldForAll: 2, Top: dests(30, 20)},
		{Inode: 2, Namespace: "ns", Pod: "web", Usable: 50, Top: dests(5)}}})
	if u, us, a := portSeries(t, p); u != 3 || us != 2 || a != 2 {
		t.Fatalf("series %d %d %d, want 3 2 2", u, us, a)
	}
	if v := gaugeValue(p.inUse.WithLabelValues("2", "ns", "web", "10.0.0.1:80")); v != 5 {
		t.Errorf("pod's in use %v, want 5", v)
	}
	// netns 2 went away; netns 1's second destination left its top.
	p.sampled(&PortSample{NetNS: []NetNSPorts{{Inode: 1, Host: true, Usable: 100, HeldForAll: 2, Top: dests(31)}}})
	if u, us, a := portSeries(t, p); u != 1 || us != 1 || a != 1 || p.series != 3 {
		t.Fatalf("series %d %d %d (%d counted), want 1 1 1 (3)", u, us, a, p.series)
	}
}

// Past the cap, series are not made, and what is cut is counted.
func TestPortSeriesCap(t *testing.T) {
	p := newPortMetrics(4, false)
	p.sampled(&PortSample{NetNS: []NetNSPorts{{Inode: 1, Usable: 100, Top: dests(30, 20, 10)}}})
	u, us, a := portSeries(t, p)
	if u+us+a != 4 {
		t.Errorf("%d series, want the cap 4", u+us+a)
	}
	if v := gaugeValue(p.cut); v != 1 {
		t.Errorf("cut %v, want 1", v)
	}
	// A destination leaving makes room again.
	p.sampled(&PortSample{NetNS: []NetNSPorts{{Inode: 1, Usable: 100, Top: dests(30, 20)}}})
	if u, _, _ := portSeries(t, p); u != 2 || gaugeValue(p.cut) != 1 {
		t.Errorf("%d in-use series, cut %v; want 2, 1", u, gaugeValue(p.cut))
	}
}

// The sampler's goroutine samples at once and on its ticker, and stop ends
// it: no sample is published after stop returns.
func TestPortSamplerStops(t *testing.T) {
	s := newPortSampler(time.Millisecond, 1, 0, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.members = func() (map[uint64]int, error) { return map[uint64]int{}, nil }
	var n atomic.Int64
	three := make(chan struct{})
	s.publish = func(*PortSample) {
		if n.Add(1) == 3 {
			close(three)
		}
	}
	stop := s.start(context.Background())
	<-three // the first sample and two ticks
	stop()
	after := n.Load()
	s.members() // a goroutine left running would go on publishing; run -race to see it
	if got := n.Load(); got != after {
		t.Errorf("%d samples published after stop", got-after)
	}
}

// A sample that takes more than 1% of the interval stretches the wait
// before the next to 100 times its time, and the metrics and the log say
// so; a quick one keeps --ports-interval.
func TestPortSamplerStretches(t *testing.T) {
	var logs bytes.Buffer
	s := newPortSampler(15*time.Second, 1, 0, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	s.members = func() (map[uint64]int, error) { return map[uint64]int{}, nil }
	clock, step := time.Unix(0, 0), 3*time.Second // each sample "takes" step on this clock
	s.now = func() time.Time { clock = clock.Add(step); return clock }
	var got *PortSample
	s.publish = func(p *PortSample) { got = p }
	if w := s.once(15 * time.Second); w != 300*time.Second || got.Took != step || got.Next != w {
		t.Errorf("a 3 s sample: wait %v (published took %v, next %v), want 5m0s", w, got.Took, got.Next)
	}
	if !strings.Contains(logs.String(), "sampling every 5m0s") {
		t.Errorf("the stretch was not logged: %q", logs.String())
	}
	step = 100 * time.Millisecond
	if w := s.once(300 * time.Second); w != 15*time.Second {
		t.Errorf("a 100 ms sample: wait %v, want the interval 15s", w)
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
