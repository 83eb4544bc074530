package ports

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPace(t *testing.T) {
	for _, c := range []struct {
		every, took time.Duration
		share       int
		want        time.Duration
	}{
		{2 * time.Second, 0, TopShare, 2 * time.Second},
		{2 * time.Second, 200 * time.Millisecond, TopShare, 2 * time.Second}, // a tenth: not stretched
		{2 * time.Second, 201 * time.Millisecond, TopShare, 2010 * time.Millisecond},
		{2 * time.Second, 3 * time.Second, TopShare, 30 * time.Second},
		{15 * time.Second, 150 * time.Millisecond, TraceShare, 15 * time.Second}, // 1%: not stretched
		{15 * time.Second, 3 * time.Second, TraceShare, 300 * time.Second},
	} {
		if got := Pace(c.every, c.took, c.share); got != c.want {
			t.Errorf("Pace(%s, %s, %d) = %s, want %s", c.every, c.took, c.share, got, c.want)
		}
	}
}

// emptySampler samples no netns, on a clock each sample moves by *step.
func emptySampler(log *slog.Logger, step *time.Duration) *Sampler {
	s := New(Config{NoWalk: true, Log: log})
	s.members = func() (map[uint64]int, error) { return map[uint64]int{}, nil }
	if step != nil {
		clock := time.Unix(0, 0)
		s.now = func() time.Time { clock = clock.Add(*step); return clock } // a sample's took: between two reads
	}
	return s
}

// The sampler's goroutine samples at once and on its timer, and stop ends
// it: no sample is published after stop returns.
func TestStartStops(t *testing.T) {
	s := emptySampler(slog.New(slog.DiscardHandler), nil)
	var n atomic.Int64
	three := make(chan struct{})
	stop := s.Start(context.Background(), time.Millisecond, TraceShare, func(*Sample, time.Duration) {
		if n.Add(1) == 3 {
			close(three)
		}
	})
	<-three // the first sample and two more
	stop()
	after := n.Load()
	s.Sample() // a goroutine left running would go on publishing; run -race to see it
	if got := n.Load(); got != after {
		t.Errorf("%d samples published after stop", got-after)
	}
}

// A sample that takes more than 1% of the interval stretches the wait
// before the next to 100 times its time, and the log says so; a quick one
// keeps the interval.
func TestStartStretches(t *testing.T) {
	var logs bytes.Buffer
	step := 3 * time.Second // each sample "takes" step
	s := emptySampler(slog.New(slog.NewTextHandler(&logs, nil)), &step)
	var took, next time.Duration
	publish := func(p *Sample, wait time.Duration) { took, next = p.Took, wait }
	if w := s.once(15*time.Second, 15*time.Second, TraceShare, publish); w != 300*time.Second || took != step || next != w {
		t.Errorf("a 3 s sample: wait %v (published took %v, next %v), want 5m0s", w, took, next)
	}
	if !strings.Contains(logs.String(), "sampling every 5m0s to stay within 1% of a core") {
		t.Errorf("the stretch was not logged: %q", logs.String())
	}
	step = 100 * time.Millisecond
	if w := s.once(15*time.Second, 300*time.Second, TraceShare, publish); w != 15*time.Second {
		t.Errorf("a 100 ms sample: wait %v, want the interval 15s", w)
	}
}
