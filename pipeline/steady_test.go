package pipeline

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/recorded"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/tracer"
)

// The steady per-event path at eaddr's default flags with every failure an
// event (--rate-limit off): a raw record from the ring is decoded,
// attributed to a pod whose names are known, explained (short), given the
// snapshot its key already has in this interval, rendered as a JSON line
// and handed to the sink. Issue 24 wants it to allocate nothing.

// steadyRig is a trace loop without a tracer, as newWaitsRig, whose pod
// mapper names every event's pod with one Pod it reuses (the runtime's
// answer cached, as pod.PodMapper's is); its sink writes into a counter.
type steadyRig struct {
	r     *traceRun
	raw   *tracer.RawEvent
	now   time.Time
	lines *lineCount
}

// lineCount counts the lines the sink's writer writes.
type lineCount struct{ n, bytes int }

func (c *lineCount) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte{'\n'})
	c.bytes += len(p)
	return len(p), nil
}

func newSteadyRig(t testing.TB) *steadyRig {
	c := Config{Explain: 1, DiagnoseEvery: time.Second, Node: "node-a"}
	c.defaults()
	g := &steadyRig{raw: recorded.Raw(t, "connect-eaddrnotavail-busybox-wget-ipv4"), now: time.Unix(1_700_000_000, 0), lines: &lineCount{}}
	r := &traceRun{c: c, log: slog.New(slog.DiscardHandler), limits: newLimitBook(false, false), hold: newHoldQueue(holdMax),
		dec: decode.NewDecoder(nil), diagLate: lateDiagnosis(c.DiagnoseWait), held: newEventPool(holdMax)}
	x, err := explain.NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	x.Detector.Async = true
	r.explainer = x
	r.now = func() time.Time { return g.now }
	// The binary is this machine's busybox, which the analyser finds by
	// its name beneath this test's root, as the recorded one's was.
	bb := testenv.Program(t, "busybox", "busybox-static")
	var st, mnt unix.Stat_t
	if unix.Stat(bb, &st) != nil || unix.Stat("/proc/self/ns/mnt", &mnt) != nil {
		t.Fatalf("stat %s or this test's mount namespace", bb)
	}
	g.raw.ExeIno, g.raw.ExeDev = st.Ino, uint32(unix.Major(st.Dev)<<20|unix.Minor(st.Dev))
	g.raw.Ppid, g.raw.Mntns = uint32(os.Getpid()), uint32(mnt.Ino)
	r.bins = newBinWait(x.Detector, newBinWorker(1, binQueue, findBinary), DefaultBinaryWait)
	t.Cleanup(r.bins.w.close)
	p := &decode.Pod{UID: "0d3c6e2a-uid", ContainerID: "cid-1", Name: "web-7f9c", Namespace: "shop", Container: "app",
		Labels: map[string]string{"app": "web"}}
	r.attr = namedAttribution{p}
	r.sk = output.NewSink(g.lines, 64<<10, 64, nil)
	r.diag = &diagWorker{pool: newEventPool(64), reqs: make(chan diagReq, 64), results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
	r.share, r.seenNetNS = newDiagShare(c.DiagnoseEvery), map[uint32]bool{}
	g.r = r
	t.Cleanup(func() { r.sk.Close(time.Second) })

	// The first event asks for its binary, which the analyser finds, and
	// for its key's snapshot, which the test answers as the worker would;
	// later events of the interval share it.
	r.handle(g.raw)
	if len(r.diagHold) != 1 {
		t.Fatalf("the first event does not wait for its snapshot (%d held)", len(r.diagHold))
	}
	for deadline := time.Now().Add(time.Minute); r.bins.w.finished.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the analyser did not analyse busybox in a minute")
		}
	}
	for len(r.diag.reqs) > 0 {
		<-r.diag.reqs
	}
	r.diag.results[r.diagHold[0].ticket] = &diagnose.Diagnosis{Verdict: "ephemeral ports exhausted toward 127.0.0.1:8080",
		Fix: []string{"reuse connections", "widen net.ipv4.ip_local_port_range"}, RangeLo: 40000, RangeHi: 40001, Usable: 2, InUse: 2,
		States: []diagnose.Count{{State: "ESTABLISHED", N: 2}}, Cause: "ephemeral_exhausted", Counted: true, Exhausted: true, At: g.now}
	g.step() // and writes the first
	return g
}

// namedAttribution names every event's pod with one Pod.
type namedAttribution struct{ p *decode.Pod }

func (a namedAttribution) Map(ev *decode.Event, final bool) bool {
	ev.Pod, ev.PodUnresolved, ev.PodNamesUnresolved = a.p, "", ""
	return false
}

func (a namedAttribution) Answered() uint64 { return 0 }

// step is one turn of the loop with one event read, in a storm: handle,
// the looks at the queues; the sink hands a batch on when it is full (the
// ring is never drained, so the loop does not flush).
func (g *steadyRig) step() {
	g.r.handle(g.raw)
	g.r.release(false)
	g.r.releaseDiag(false)
	g.r.releaseBins(false)
}

func TestSteadyPathDoesNotAllocate(t *testing.T) {
	g := newSteadyRig(t)
	for i := 0; i < 100; i++ { // warm: the pools' buffers exist
		g.step()
	}
	// AllocsPerRun divides by its runs, dropping the remainder: one run of
	// n events, so that a single allocation shows. The sink makes a new
	// batch (3 allocations) when the writer falls behind, until depth
	// batches exist: bounded, and counted apart.
	const n = 500
	var grown int
	allocs := testing.AllocsPerRun(1, func() {
		spare := g.r.sk.Spare()
		for i := 0; i < n; i++ {
			g.step()
		}
		grown = spare - g.r.sk.Spare()
	})
	if extra := allocs - float64(3*grown); extra != 0 {
		t.Errorf("the steady per-event path allocated %.0f times in %d events (beside the sink's %d new batches); want 0 (go test -run %s -memprofile m.out -memprofilerate 1 ./pipeline; go tool pprof -sample_index alloc_objects -top pipeline.test m.out)", extra, n, grown, t.Name())
	}
	// What the path did is what it is meant to do: every event written,
	// with its names, its explanation and the shared snapshot.
	var last string
	g.r.consumers = []consumer{eventHook(func(_ *decode.Event, _ *explain.Explanation, line []byte) { last = string(line) })}
	g.step()
	g.r.sk.Close(5 * time.Second)
	const steps = 2 + 100 + 2*n + 1 // newSteadyRig's two, the warm-up, AllocsPerRun's two runs of n, the last
	if w := int(g.r.written); w != steps || g.lines.n != w || g.r.sk.Dropped() != 0 {
		t.Fatalf("written %d, lines %d, dropped %d; want %d each and none dropped", w, g.lines.n, g.r.sk.Dropped(), steps)
	}
	if g.r.share.shared != steps-1 || len(g.r.diagHold) != 0 {
		t.Errorf("%d events shared the snapshot, %d wait; want %d and 0", g.r.share.shared, len(g.r.diagHold), steps-1)
	}
	for _, want := range []string{`"name":"web-7f9c"`, `"client":"busybox wget"`, `ephemeral ports exhausted`, `"shared":true`} {
		if !strings.Contains(last, want) {
			t.Errorf("the last event's line lacks %s: %s", want, last)
		}
	}
}

// BenchmarkSteadyEvent is the same path per event; `make bench` runs it
// beside eaddr's own CPU per line (its per-event section).
func BenchmarkSteadyEvent(b *testing.B) {
	g := newSteadyRig(b)
	b.ReportAllocs()
	for b.Loop() {
		g.step()
	}
	b.StopTimer()
	g.r.sk.Close(5 * time.Second)
	// The sink drops a batch rather than block when its writer (here a
	// line counter) has not taken the 64 before it: on a busy host the
	// writer goroutine can fall that far behind. Reported, not failed.
	b.ReportMetric(float64(g.r.sk.Dropped())/float64(b.N), "dropped/op")
}
