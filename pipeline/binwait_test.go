package pipeline

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// The binary analysis beside the reader, on the clock the test moves: the
// test plays the analysers (no goroutine), or runs real ones whose find it
// controls.

// withBins gives the rig the explainer, Async, and the analysis stage:
// n analysers of newFind (0: the test takes the jobs), a queue of queue.
func (g *waitsRig) withBins(t *testing.T, n, queue int, newFind func() func(*decode.Event) explain.Found) *binWorker {
	t.Helper()
	x, err := explain.NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	x.Detector.Async = true
	g.r.explainer, g.r.c.Explain, g.r.t = x, 1, &fakeSource{}
	w := newBinWorker(n, queue, newFind)
	w.now = func() time.Time { return g.now }
	if n > 0 {
		w.now = time.Now // the analysers' goroutines do not read the rig's clock
	}
	t.Cleanup(w.close)
	g.r.bins = newBinWait(x.Detector, w, DefaultBinaryWait)
	return w
}

// exeRaw is a failure of a process (gone: its pid is past pid_max) that ran
// the file at path, by argv[0] path, child of this test in its mount
// namespace: the analysers find it beneath this test's root.
func (g *waitsRig) exeRaw(t *testing.T, tid uint32, path string) tracer.RawEvent {
	t.Helper()
	var st, mnt unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/mnt", &mnt); err != nil {
		t.Fatal(err)
	}
	raw := g.raw(tid, 5, "", 8080)
	raw.Tgid, raw.Ppid, raw.Mntns = 1<<30, uint32(os.Getpid()), uint32(mnt.Ino)
	raw.ExeIno, raw.ExeDev = st.Ino, uint32(unix.Major(st.Dev)<<20|unix.Minor(st.Dev))
	raw.ArgsLen = uint16(len(path) + 1)
	for i, c := range []byte(filepath.Base(path)) {
		raw.ExeName[i] = int8(c)
	}
	for i, c := range []byte(path) {
		raw.Args[i] = int8(c)
	}
	return raw
}

// answer plays an analyser: it takes the next job and finds its binary.
func answer(t *testing.T, w *binWorker, now time.Time) {
	t.Helper()
	j := take(t, w, now)
	j.found = explain.NewFinder().Find(j.ev)
	j.done.Store(true)
	w.finished.Add(1)
}

// take plays an analyser that takes the next job and starts reading.
func take(t *testing.T, w *binWorker, now time.Time) *binJob {
	t.Helper()
	select {
	case j := <-w.jobs:
		j.started.Store(now.UnixNano())
		return j
	default:
		t.Fatal("no binary was asked of the analysers")
		return nil
	}
}

// An event whose binary is being analysed waits the binary wait from the
// ask, no less, then goes out naming no client and saying why; the binary
// is asked once; later events of it carry the analysis once it is done;
// an event whose analysis is done within its wait goes out with it at the
// next look. The reader looks every holdPoll while one waits.
func TestBinaryWait(t *testing.T) {
	g := newWaitsRig(t, Config{})
	g.rt.named[1], g.rt.named[2], g.rt.named[3] = true, true, true
	w := g.withBins(t, 0, 8, nil)
	wait, t0 := g.r.bins.wait, g.now
	app := filepath.Join(t.TempDir(), "app")
	copyFile(t, "/proc/self/exe", app) // a Go program
	raw := g.exeRaw(t, 1, app)
	g.r.handle(&raw)
	if d := g.r.readWait(time.Second); d != holdPoll || len(w.jobs) != 1 {
		t.Fatalf("an event waiting for its binary: Read waits %v, %d asked; want %v and 1", d, len(w.jobs), holdPoll)
	}
	g.at(t0.Add(wait - time.Nanosecond))
	if len(g.out) != 0 {
		t.Fatalf("written %v before its binary wait was over", g.tids())
	}
	g.at(t0.Add(wait))
	if len(g.out) != 1 || !strings.Contains(g.out[0].line, `"client_unknown":"`+g.r.bins.whyLate+`"`) {
		t.Fatalf("at the end of its wait: %+v; want the event saying %q", g.out, g.r.bins.whyLate)
	}
	answer(t, w, g.now)
	raw.Tid = 2
	g.r.handle(&raw) // the same binary: known now, written at once
	if len(g.out) != 2 || !strings.Contains(g.out[1].line, `"runtime":"go"`) || len(w.jobs) != 0 {
		t.Fatalf("after the analysis: %+v, %d asked again; want the event with runtime go, none asked", g.out[1:], len(w.jobs))
	}

	bb := filepath.Join(t.TempDir(), "busybox")
	copyFile(t, testenv.Program(t, "busybox", "busybox-static"), bb)
	raw = g.exeRaw(t, 3, bb)
	t1 := g.now.Add(time.Minute)
	g.at(t1)
	g.r.handle(&raw)
	answer(t, w, t1)
	g.at(t1.Add(time.Millisecond))
	if len(g.out) != 3 || !strings.Contains(g.out[2].line, `"runtime":"busybox"`) {
		t.Fatalf("analysed within its wait: %+v; want it written at the next look, runtime busybox", g.out[2:])
	}
	s := g.r.stats()
	if s.BinariesHeld != 2 || s.BinariesLate != 1 || s.BinaryWaitMax != wait || s.BinariesSkipped != 0 || s.BinariesStuck != 0 {
		t.Errorf("held %d, late %d, longest wait %v, skipped %d, stuck %d; want 2, 1, %v, 0, 0",
			s.BinariesHeld, s.BinariesLate, s.BinaryWaitMax, s.BinariesSkipped, s.BinariesStuck, wait)
	}
}

// An analysis stuck in a read: the events of its binary no longer wait
// and say why; no other binary of its file system is asked meanwhile
// (counted skipped, and refused until the negative cache's end); others
// are; the stuck analysis is counted in the stop line and the gauge.
func TestBinaryAnalysisStuck(t *testing.T) {
	g := newWaitsRig(t, Config{})
	for tid := uint32(1); tid <= 5; tid++ {
		g.rt.named[tid] = true
	}
	g.withMetrics(t)
	w := g.withBins(t, 0, 8, nil)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	copyFile(t, "/proc/self/exe", a)
	copyFile(t, "/proc/self/exe", b)
	t0 := g.now
	raw := g.exeRaw(t, 1, a)
	g.r.handle(&raw)
	take(t, w, t0) // and never done
	g.at(t0.Add(binStuck))
	raw.Tid = 2
	g.r.handle(&raw)
	if len(g.out) != 2 || !strings.Contains(g.out[1].line, `"client_unknown":"`+whyStuck+`"`) {
		t.Fatalf("a stuck binary's event: %+v; want it written at once saying %q", g.out[1:], whyStuck)
	}
	other := g.exeRaw(t, 3, b) // the same file system
	g.r.handle(&other)
	if len(g.out) != 3 || len(w.jobs) != 0 || !strings.Contains(g.out[2].line, "a read of another binary on the same file system") {
		t.Fatalf("another binary of that file system: %+v, %d asked; want it written at once, not asked, saying why", g.out[2:], len(w.jobs))
	}
	busy := g.exeRaw(t, 4, testenv.Program(t, "busybox", "busybox-static")) // another file system, probably: asked
	if busy.ExeDev != raw.ExeDev {
		g.r.handle(&busy)
		if len(w.jobs) != 1 {
			t.Errorf("a binary of another file system was not asked while one is stuck")
		}
	}
	g.r.updateMetrics(tracer.Stats{})
	s := g.r.stats()
	if s.BinariesStuck != 1 || s.BinariesSkipped != 1 || s.BinariesLate != 2 || g.r.met.binariesStuck.Load() != 1 || g.r.met.binariesSkipped.Load() != 1 {
		t.Errorf("stuck %d, skipped %d, late %d, gauge %d, metric %d; want 1, 1, 2, 1, 1",
			s.BinariesStuck, s.BinariesSkipped, s.BinariesLate, g.r.met.binariesStuck.Load(), g.r.met.binariesSkipped.Load())
	}
	attrs := g.r.stoppedAttrs(s)
	for _, name := range []string{"binaries_stuck", "binaries_skipped", "binaries_late"} {
		if !slices.Contains(attrs, any(name)) {
			t.Errorf("the stopped line %v has no %s", attrs, name)
		}
	}
}

// However many binaries are asked while every analyser is stuck in a
// read, no goroutine is started for them, at most the queue waits, and
// the rest are refused, counted and say why.
func TestBinaryAnalysersBounded(t *testing.T) {
	g := newWaitsRig(t, Config{})
	release := make(chan struct{})
	var entered atomic.Int32
	before := runtime.NumGoroutine()
	g.withBins(t, binWorkers, binQueue, func() func(*decode.Event) explain.Found {
		return func(*decode.Event) explain.Found {
			entered.Add(1)
			<-release // a read that does not return
			return explain.Found{}
		}
	})
	defer close(release)
	if n := runtime.NumGoroutine() - before; n != binWorkers {
		t.Fatalf("%d goroutines for %d analysers", n, binWorkers)
	}
	ev := decode.Event{ExeDev: 1}
	for ino := range uint64(binWorkers) {
		ev.ExeIno = ino + 1
		g.r.bins.ask(&ev, g.now)
	}
	for deadline := time.Now().Add(time.Minute); entered.Load() < binWorkers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d analysers started in a minute", entered.Load(), binWorkers)
		}
	}
	goroutines := runtime.NumGoroutine()
	for ino := range uint64(100) {
		ev.ExeIno = 1000 + ino
		g.r.bins.ask(&ev, g.now)
	}
	if n := runtime.NumGoroutine(); n != goroutines || entered.Load() != binWorkers {
		t.Errorf("asking 100 more binaries: %d goroutines (was %d), %d analyses started; want none more", n, goroutines, entered.Load())
	}
	if n, s := len(g.r.bins.inflight), g.r.bins.skipped; n != binWorkers+binQueue || s != 100-binQueue {
		t.Errorf("%d asked, %d skipped; want %d and %d", n, s, binWorkers+binQueue, 100-binQueue)
	}
	var x explain.Explanation
	ev.ExeIno = 1099
	g.r.explainer.Explain(&ev, &x, false)
	if x.ClientUnknown != whyQueueFull {
		t.Errorf("a refused binary says %q, want %q", x.ClientUnknown, whyQueueFull)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A thread's failures go out in the order the kernel reported them: when
// its binary's analysis comes in between two of them, the later one, known
// at once, does not overtake the earlier one still held (it would be
// written first, and its retry counted as a fresh attempt).
func TestBinaryWaitKeepsOrder(t *testing.T) {
	g := newWaitsRig(t, Config{})
	g.rt.named[1] = true
	w := g.withBins(t, 0, 8, nil)
	app := filepath.Join(t.TempDir(), "app")
	copyFile(t, "/proc/self/exe", app)
	first := g.exeRaw(t, 1, app)
	g.r.handle(&first)
	answer(t, w, g.now) // done, not yet looked at: the first is still held
	second := first
	second.BootNs += uint64(time.Millisecond)
	g.r.handle(&second)
	g.r.releaseBins(true)
	if len(g.out) != 2 {
		t.Fatalf("written %d events; want 2", len(g.out))
	}
	// The first attempt carries no number; a retry says "attempt":2.
	if strings.Contains(g.out[0].line, `"attempt":`) || !strings.Contains(g.out[1].line, `"attempt":2`) {
		t.Errorf("written:\n%s\n%s\nwant the first, then its retry as attempt 2", g.out[0].line, g.out[1].line)
	}
}
