package top

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// slowSampler's audits take took on its clock, which only it moves.
func slowSampler(took time.Duration) *Sampler {
	now := t0
	return &Sampler{
		Audit: func() ([]diagnose.NetNSReport, error) {
			now = now.Add(took)
			return []diagnose.NetNSReport{report(1, "10.0.0.1:80", 10, 1000)}, nil
		},
		Now:           func() time.Time { return now },
		NoFailuresWhy: "test",
	}
}

// firstWrite cancels the view's context on its first write: Plain then
// returns instead of waiting for a second sample.
type firstWrite struct {
	b      strings.Builder
	cancel context.CancelFunc
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.b.Write(p)
}

func (w *firstWrite) String() string { return w.b.String() }

// A sample that takes 3 s at a 2 s interval makes Plain wait 30 s, and
// its header and JSON say so: top never samples back to back.
func TestPlainPacesASlowSample(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		w := &firstWrite{cancel: cancel}
		if err := Plain(ctx, slowSampler(3*time.Second), NewModel(), 2*time.Second, asJSON, 0, w); err != nil {
			t.Fatal(err)
		}
		out := w.String()
		if !asJSON {
			if want := "every 30s (not 2s: a sample took 3s, and top samples at most 1/10 of the time)"; !strings.Contains(out, want) {
				t.Errorf("table header:\n%s\nwant %q", out, want)
			}
			continue
		}
		var snap Snapshot
		if err := json.Unmarshal([]byte(out), &snap); err != nil {
			t.Fatal(err)
		}
		if snap.IntervalSeconds != 30 || snap.SampleSeconds != 3 {
			t.Errorf("interval_seconds %v, sample_seconds %v; want 30 and 3", snap.IntervalSeconds, snap.SampleSeconds)
		}
	}
}

// A quick sample keeps the interval, and the header its plain words.
func TestPlainKeepsTheIntervalForAQuickSample(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &firstWrite{cancel: cancel}
	if err := Plain(ctx, slowSampler(100*time.Millisecond), NewModel(), 2*time.Second, false, 0, w); err != nil {
		t.Fatal(err)
	}
	if out := w.String(); !strings.Contains(out, "  every 2s  1 netns") {
		t.Errorf("table header:\n%s\nwant every 2s", out)
	}
}

// The interactive view's header, as Interactive builds it, names the
// stretched wait; --once's, which takes its samples --interval apart
// whatever they cost, does not.
func TestHeaderNamesTheStretch(t *testing.T) {
	m := NewModel()
	m.Add(Sample{At: t0, Took: 3 * time.Second, NetNS: []diagnose.NetNSReport{report(1, "10.0.0.1:80", 10, 1000)}})
	live := strings.Join(m.Table(Header{Interval: 2 * time.Second, Paced: true, Keys: true}), "\n")
	once := strings.Join(m.Table(Header{Interval: 2 * time.Second}), "\n")
	if !strings.Contains(live, "every 30s (not 2s") || !strings.Contains(once, "  every 2s  ") {
		t.Errorf("live header:\n%s\nonce header:\n%s", live, once)
	}
}

// The interactive view's sampler waits Pace's time after a slow sample,
// and the interval after a quick one.
func TestSampleEveryPaces(t *testing.T) {
	for _, c := range []struct{ took, want time.Duration }{{3 * time.Second, 30 * time.Second}, {0, 2 * time.Second}} {
		var waited time.Duration
		stop := func(_ context.Context, d time.Duration) bool { waited = d; return false }
		out := make(chan result, 1)
		var paused atomic.Bool
		sampleEvery(context.Background(), slowSampler(c.took), 2*time.Second, &paused, out, stop)
		if r := <-out; r.err != nil || waited != c.want {
			t.Errorf("sample of %s: waited %s (err %v), want %s", c.took, waited, r.err, c.want)
		}
	}
}
