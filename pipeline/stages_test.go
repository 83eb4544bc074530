package pipeline

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/tracer"
)

// The stages one by one, without root: each test puts events in through
// handle (or a source), and reads what the stages did from their counters
// and the consumers.

// countingDecoder is decode.Decoder, counting its calls by thread.
type countingDecoder struct {
	d     *decode.Decoder
	calls map[uint32]int
}

func (c *countingDecoder) Decode(raw *tracer.RawEvent, ev *decode.Event) {
	c.calls[raw.Tid]++
	c.d.Decode(raw, ev)
}

// Every event is decoded once on its whole way, through both waits, and
// attributed once; the attributor is asked again only for names, when the
// runtime answered or the event's wait ended.
func TestOneDecodeOneAttribution(t *testing.T) {
	g := newWaitsRig(t, Config{DiagnoseEvery: time.Second, NamesWait: time.Second, DiagnoseWait: time.Second})
	dec := &countingDecoder{d: decode.NewDecoder(nil), calls: map[uint32]int{}}
	g.r.dec = dec
	t0 := g.now
	g.rt.named[1] = true
	g.fail(1, 5) // named: waits for its snapshot only
	g.fail(2, 5) // waits for its names, then for the same snapshot
	g.fail(3, 5) // waits for its names until its wait ends
	g.rt.named[2], g.rt.answered = true, 1
	g.at(t0.Add(time.Millisecond)) // the answer for 2: it goes on to the diagnosis wait
	g.at(t0.Add(time.Second))      // 3's names wait ends
	for _, h := range g.r.diagHold {
		g.r.diag.results[h.ticket] = &diagnose.Diagnosis{Verdict: "test"}
	}
	g.at(t0.Add(time.Second + time.Millisecond))
	if got := g.tids(); len(got) != 3 {
		t.Fatalf("written %v; want the three events", got)
	}
	for tid, want := range map[uint32]int{1: 1, 2: 2, 3: 4} {
		if n := dec.calls[tid]; n != 1 {
			t.Errorf("event %d decoded %d times; want once", tid, n)
		}
		// 1: once. 2: once, and again after the runtime's answer. 3: once,
		// again after the answer for 2 (all held are looked at), and at
		// the end of its wait, and once more as it leaves the diagnosis
		// wait, the only event still without names (they may have come
		// meanwhile).
		if n := g.rt.maps[tid]; n != want {
			t.Errorf("event %d attributed %d times; want %d", tid, n, want)
		}
	}
}

// The hold queue keeps events in arrival order and no more than its bound:
// past it an event goes out at once, without names and saying why, and is
// counted as not awaited; the held ones go out in order when named.
func TestHoldQueueBound(t *testing.T) {
	g := newWaitsRig(t, Config{NamesWait: time.Second})
	g.r.hold = newHoldQueue(2)
	for tid := uint32(1); tid <= 3; tid++ {
		g.fail(tid, 5)
	}
	if got := g.tids(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("with 2 held, written %v; want the third at once", got)
	}
	if !strings.Contains(g.out[0].line, pod.NamesWait) {
		t.Errorf("the event that did not wait says %s; want %q", g.out[0].line, pod.NamesWait)
	}
	if s := g.r.hold; s.overflow != 1 || s.held != 2 { // Stats' NamesNotAwaited, NamesHeld
		t.Errorf("not awaited %d, held %d; want 1 and 2", s.overflow, s.held)
	}
	g.rt.named[1], g.rt.named[2], g.rt.answered = true, true, 1
	g.at(g.now.Add(time.Millisecond))
	if got := g.tids(); len(got) != 3 || got[1] != 1 || got[2] != 2 {
		t.Errorf("written %v; want 3, then 1 and 2 in their order", got)
	}
	g.fail(4, 5) // the queue has room again
	if len(g.r.hold.q) != 1 {
		t.Errorf("after the queue emptied, %d held; want the new event", len(g.r.hold.q))
	}
}

// fakeSource is the tracer's ring: records until it is closed, then
// tracer.ErrClosed; a Read with nothing left times out as a deadline does.
type fakeSource struct {
	recs   []tracer.RawEvent
	closed bool
	stats  tracer.Stats // what Stats returns
}

func (f *fakeSource) Read(raw *tracer.RawEvent) error {
	if len(f.recs) == 0 {
		if f.closed {
			return tracer.ErrClosed
		}
		f.closed = true // the next Read ends the loop, as Stop does
		return os.ErrDeadlineExceeded
	}
	*raw, f.recs = f.recs[0], f.recs[1:]
	return nil
}
func (f *fakeSource) SetDeadline(time.Time)        {}
func (f *fakeSource) Pending() int                 { return len(f.recs) }
func (f *fakeSource) Stats() (tracer.Stats, error) { return f.stats, nil }
func (f *fakeSource) LimitCounts() (uint64, uint64, error) {
	return 0, 0, nil
}
func (f *fakeSource) LimitStates(func(id, suppressed uint64)) (int, error) { return 0, nil }
func (f *fakeSource) LimitKeysMax() int                                    { return 0 }
func (f *fakeSource) CgroupLimitStates(func(tracer.CgroupLimitKey, uint64)) (uint64, error) {
	return 0, nil
}

// lockedBuffer is stdout: the sink writes from its own goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// At stop every event still waiting, for its names or its snapshot, is
// written with why it did not get them, in the order it was read, and the
// sink's last batch reaches stdout.
func TestLoopFlushesAtStop(t *testing.T) {
	g := newWaitsRig(t, Config{DiagnoseEvery: time.Second, NamesWait: time.Hour, DiagnoseWait: 10 * time.Millisecond})
	src := &fakeSource{}
	g.rt.named[2] = true
	for tid := uint32(1); tid <= 3; tid++ { // 1 and 3 wait for names, 2 for its snapshot
		raw := g.raw(tid, 5, "", 8080)
		src.recs = append(src.recs, raw)
	}
	out := &lockedBuffer{}
	g.r.t, g.r.sk = src, output.NewSink(out, 64<<10, 64, nil)
	if err := g.r.loop(); err != nil {
		t.Fatal(err)
	}
	g.r.sk.Close(time.Minute)
	if got := g.tids(); len(got) != 3 || got[0] != 2 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("written at stop %v; want 2 (named, its snapshot late), then 1 and 3 in their order", got)
	}
	for _, w := range g.out {
		if w.tid != 2 && !strings.Contains(w.line, pod.NamesWait) {
			t.Errorf("event %d went out at stop saying %s; want %q", w.tid, w.line, pod.NamesWait)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || g.r.sk.Delivered() != 3 {
		t.Errorf("stdout got %d lines, %d delivered; want the 3 written", len(lines), g.r.sk.Delivered())
	}
}

// recorder is a consumer that keeps what it was told.
type recorder struct{ lines []string }

func (c *recorder) consume(e *emitted) { c.lines = append(c.lines, string(e.line)) }

// Every consumer is told of every event written, in order, with the line as
// it was written; an event a filter dropped reaches none.
func TestConsumersSeeEveryLine(t *testing.T) {
	g := newWaitsRig(t, Config{Comm: "curl"})
	a, b := &recorder{}, &recorder{}
	g.r.consumers = append(g.r.consumers, a, b)
	g.rt.named[1], g.rt.named[2], g.rt.named[3] = true, true, true
	g.failAs(1, 5, "curl", 8080)
	g.failAs(2, 5, "wget", 8080) // filtered
	g.failAs(3, 5, "curl", 9090)
	if len(g.out) != 2 {
		t.Fatalf("written %v; want the two curl events", g.tids())
	}
	for name, c := range map[string]*recorder{"first": a, "second": b} {
		if len(c.lines) != 2 || c.lines[0] != g.out[0].line || c.lines[1] != g.out[1].line {
			t.Errorf("the %s consumer was told %q; want the written lines %q, %q", name, c.lines, g.out[0].line, g.out[1].line)
		}
	}
}

// The diagnosis wait keeps events in the order they came, whichever
// snapshot comes first, and asks the worker no more than its queue holds:
// past it an event goes out at once saying so, counted as skipped.
func TestDiagnosisQueueBound(t *testing.T) {
	g := newWaitsRig(t, Config{DiagnoseEvery: time.Second, DiagnoseWait: time.Second})
	done := make(chan struct{})
	close(done)
	g.r.diag = &diagWorker{pool: newEventPool(4), reqs: make(chan diagReq, 3), done: done, // the netns told, two asks
		results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
	for tid := uint32(1); tid <= 3; tid++ {
		g.rt.named[tid] = true
		g.failAs(tid, 5, "", uint16(8080+tid)) // a key each: three snapshots asked
	}
	if got := g.tids(); len(got) != 1 || got[0] != 3 || !strings.Contains(g.out[0].line, "diagnoses_skipped") {
		t.Fatalf("with the worker's queue full, written %+v; want the third at once, skipped", g.out)
	}
	if strings.Contains(g.out[0].line, "snapshot_time") {
		t.Errorf("a skipped diagnosis claims a snapshot time: %s", g.out[0].line)
	}
	if g.r.diag.full != 1 { // Stats' DiagnosesSkipped
		t.Errorf("%d diagnoses skipped; want 1", g.r.diag.full)
	}
	held := g.r.diagHold
	g.r.diag.results[held[1].ticket] = &diagnose.Diagnosis{Verdict: "second"}
	g.at(g.now.Add(time.Millisecond))
	if len(g.out) != 1 {
		t.Fatalf("written %v before the first event's snapshot came; want it to keep its place", g.tids())
	}
	g.r.diag.results[held[0].ticket] = &diagnose.Diagnosis{Verdict: "first"}
	g.at(g.now.Add(time.Millisecond))
	if got := g.tids(); len(got) != 3 || got[1] != 1 || got[2] != 2 {
		t.Errorf("written %v; want 3, then 1 and 2 in their order", got)
	}
}
