package pipeline

import (
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eaddr/eaddr/tracer"
)

// stallingSource is the ring with a reader that stays in Read until the
// test lets it return: a reader that stalled.
type stallingSource struct {
	fakeSource
	entered chan struct{} // a Read began
	ret     chan error    // what the Read in progress returns
}

func (s *stallingSource) Read(*tracer.RawEvent) error {
	s.entered <- struct{}{}
	return <-s.ret
}

// /healthz fails when the reader has not come back from the ring for
// longer than its stall bound, and passes again once it has; an idle ring
// (a Read that ends at its deadline) is a reader that came back. On a
// clock the test moves.
func TestHealthzReaderStall(t *testing.T) {
	g := newWaitsRig(t, Config{})
	g.withMetrics(t)
	var clock atomic.Int64
	clock.Store(g.now.UnixNano())
	g.r.now = func() time.Time { return time.Unix(0, clock.Load()) }
	src := &stallingSource{entered: make(chan struct{}), ret: make(chan error)}
	g.r.t = src
	m := g.r.met
	stall := readerStall(0)
	m.stallAfter.Store(int64(stall))
	m.healthy.Store(true)
	done := make(chan error, 1)
	go func() { done <- g.r.loop() }()
	defer func() {
		src.ret <- tracer.ErrClosed
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	<-src.entered // in Read since t0
	t0 := g.r.now()
	if code, body := m.health(t0.Add(stall)); code != http.StatusOK {
		t.Errorf("in Read for %v: %d %s; want 200", stall, code, body)
	}
	code, body := m.health(t0.Add(stall + time.Second))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "reader stalled: the ring buffer was last read 31s ago (more than 30s)") {
		t.Errorf("in Read for %v: %d %q; want 503, reader stalled", stall+time.Second, code, body)
	}
	t.Logf("%d %s", code, body)

	t1 := t0.Add(stall + time.Second)
	clock.Store(t1.UnixNano())
	src.ret <- os.ErrDeadlineExceeded // an idle ring: the Read's deadline came
	<-src.entered
	if code, body := m.health(t1.Add(stall)); code != http.StatusOK {
		t.Errorf("back from the ring at %v: %d %s; want 200", t1.Sub(t0), code, body)
	}
	if code, _ := m.health(t1.Add(stall + time.Nanosecond)); code != http.StatusServiceUnavailable {
		t.Errorf("in Read again past the bound: %d; want 503", code)
	}
	m.healthy.Store(false)
	if code, body := m.health(t1); code != http.StatusServiceUnavailable || body != "not attached" {
		t.Errorf("detached: %d %q; want 503 not attached", code, body)
	}
}
