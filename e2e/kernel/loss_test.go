package kernel

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A flood into a deliberately tiny ring that nobody reads (eaddr is
// stopped meanwhile, so the ring is full after a dozen events and the rest
// is lost, at any speed): every generated failure is either read or counted
// lost by the kernel, and every read one is delivered, suppressed or counted
// dropped: nothing disappears without a counter.
func TestLossAccounting(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--ring-size", strconv.Itoa(os.Getpagesize()), "--rate-limit", "0", "--diagnose=false")
	p.LossOK = true
	const n = 2000
	resume := p.Pause(t)
	eaddrtest.Flood(t, ns, n)
	resume()
	c := p.Stop(t)
	t.Logf("%d failures into a %d-byte ring: %v", n, os.Getpagesize(), c)
	if c["events"]+c["lost"] != n {
		t.Errorf("events %d + lost %d != %d generated", c["events"], c["lost"], n)
	}
	if c["lost"] == 0 {
		t.Errorf("a one-page ring, not read during a %d-event flood, lost nothing", n)
	}
	if c["delivered"]+c["dropped"]+c["suppressed"]+c["filtered"] != c["events"] {
		t.Errorf("delivered %d + dropped %d + suppressed %d + filtered %d != events %d", c["delivered"], c["dropped"], c["suppressed"], c["filtered"], c["events"])
	}
	lines := p.Count()
	if lines != c["delivered"] {
		t.Errorf("%d lines on stdout, %d delivered", lines, c["delivered"])
	}
}

// --rate-limit turns a storm of identical failures into a trickle; the next
// event that passes, and the summary, say how many were suppressed. Without
// summary records or metrics the events still carry the counts.
func TestRateLimit(t *testing.T) {
	t.Run("summaries", func(t *testing.T) { testRateLimit(t, "300ms") })
	t.Run("no-summaries", func(t *testing.T) { testRateLimit(t, "0") })
}

func testRateLimit(t *testing.T, summaries string) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "20/s", "--summary-interval", summaries, "--explain", "off", "--diagnose=false")
	const n = 5000
	eaddrtest.Flood(t, ns, n)
	// At 20/s the bucket has a token again 50 ms after the storm, however
	// long the storm took: the next failure passes and carries the count.
	time.Sleep(1200 * time.Millisecond)
	last := eaddrtest.Flood(t, ns, 1)
	if evs := p.ForPID(last, 1, 30*time.Second); len(evs) != 1 {
		t.Fatalf("the failure after the storm was not written: %+v", evs)
	}
	if summaries != "0" {
		// Summaries come at eaddr's ticks, however late those come on a
		// busy machine: wait for one written after the carrying event.
		p.Mu.Lock()
		seen := len(p.Summaries)
		p.Mu.Unlock()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p.Mu.Lock()
			more := len(p.Summaries) > seen
			p.Mu.Unlock()
			if more {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no summary record within 30s of the last event (--summary-interval 300ms)")
			}
		}
	}
	c := p.Stop(t)
	p.Mu.Lock()
	defer p.Mu.Unlock()
	var carried int
	for _, ev := range p.Events {
		carried += ev.Suppressed
	}
	var summed int
	for _, s := range p.Summaries {
		m := regexp.MustCompile(`"suppressed":([0-9]+)`).FindStringSubmatch(s)
		n, _ := strconv.Atoi(m[1])
		summed += n
	}
	t.Logf("%d failures at --rate-limit 20/s: %d events written, %d suppressed; events carried %d, summaries %d", n+1, len(p.Events), c["suppressed"], carried, summed)
	if c["events"] != n+1 || c["suppressed"]+c["delivered"] != c["events"] || len(p.Events) > 100 {
		t.Errorf("totals %v with %d lines", c, len(p.Events))
	}
	if summaries == "0" {
		summed = c["suppressed"] // none to add up
	}
	if carried != c["suppressed"] || summed != c["suppressed"] {
		t.Errorf("suppressed %d, carried by events %d, by summaries %d: all three must agree", c["suppressed"], carried, summed)
	}
}

// Failures the kernel held back go where their key's events go: a storm
// the filter drops is filtered in full, none of it "suppressed", and the
// kernel's counts add up to the storm. The rate limit keys gauge proves the
// limit was on in the kernel.
func TestRateLimitFilteredStorm(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "20/s", "--comm", "no-such-comm",
		"--metrics-addr", "127.0.0.1:0", "--explain", "off", "--diagnose=false")
	base := p.MetricsURL(t)
	const n = 5000
	eaddrtest.Flood(t, ns, n)
	var keys float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && keys <= 0; time.Sleep(100 * time.Millisecond) {
		keys = eaddrtest.CacheGauge(eaddrtest.Scrape(t, base), "eaddr_cache_entries", "rate_limit_keys")
	}
	c := p.Stop(t)
	t.Logf("%d failures, all filtered out at --rate-limit 20/s: %d kernel keys; totals %v", n, int(keys), c)
	if keys <= 0 {
		t.Errorf("no rate limit key in the kernel: the limit was not on, the test proves nothing")
	}
	if c["events"] != n || c["filtered"] != n || c["suppressed"] != 0 || c["written"] != 0 {
		t.Errorf("totals %v: want %d events, all filtered, none suppressed or written", c, n)
	}
}

// A reader that stops reading makes eaddr drop (counted), not block: its
// output queue grows to its bound and no further, as
// eaddr_cache_entries{cache="output_batches"} shows, and it still stops on
// SIGINT within seconds with its totals.
func TestStalledStdout(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	testenv.RequireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(eaddrtest.EaddrBin, "trace", "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "0", "--diagnose=false", "--metrics-addr", "127.0.0.1:0")
	cmd.Stdout = w // nobody reads r: the pipe fills and stays full
	log := eaddrtest.StartLogged(t, cmd)
	w.Close()
	log.WaitFor(t, "attached", 30*time.Second)
	const n = 20000
	eaddrtest.Flood(t, ns, n)
	outputQueueFull(t, (&eaddrtest.TraceProc{Stderr: log}).MetricsURL(t))
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	if err := log.Wait(t, 15*time.Second, "a stalled stdout kept eaddr from stopping"); err != nil {
		t.Errorf("exit: %v", err)
	}
	c := eaddrtest.Totals(t, log.String())
	t.Logf("stalled stdout, %d failures: stopped in %v, %v", n, time.Since(start).Round(time.Millisecond), c)
	if c["events"]+c["lost"] != n || c["dropped"] == 0 || c["delivered"]+c["dropped"] != c["events"] {
		t.Errorf("totals %v", c)
	}
}

// outputQueueFull waits until eaddr has dropped events for a stalled stdout
// and published its output queue's size, then checks that the queue holds
// its bound, no less (it grows when stdout falls behind) and no more.
func outputQueueFull(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		fams := eaddrtest.Scrape(t, base)
		made := eaddrtest.CacheGauge(fams, "eaddr_cache_entries", "output_batches")
		bound := eaddrtest.CacheGauge(fams, "eaddr_cache_capacity", "output_batches")
		dropped := fams["eaddr_dropped_events_total"].GetMetric()[0].GetCounter().GetValue()
		if dropped > 0 && made == bound && bound > 0 {
			t.Logf("stdout stalled: %.0f dropped, output queue %.0f of %.0f batches", dropped, made, bound)
			return
		}
		if made > bound {
			t.Fatalf("output queue %.0f batches, over its bound %.0f", made, bound)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of a stalled stdout: %.0f dropped, output queue %.0f of %.0f batches; want drops and a full queue", dropped, made, bound)
		}
	}
}

// When the reader of stdout goes away, eaddr stops cleanly: exit 0 and its
// totals, not death by SIGPIPE.
func TestClosedStdout(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	testenv.RequireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(eaddrtest.EaddrBin, "trace", "--netns", strconv.FormatUint(ns.Inode(), 10))
	cmd.Stdout = w
	stderr := eaddrtest.StartLogged(t, cmd)
	w.Close()
	stderr.WaitFor(t, "attached", 30*time.Second)
	r.Close() // the consumer goes away
	eaddrtest.FailConnect(t, ns, "127.0.0.1")
	if err := stderr.Wait(t, 10*time.Second, "eaddr did not stop when its stdout was closed"); err != nil {
		t.Errorf("exit after EPIPE: %v (want 0)", err)
	}
	if !strings.Contains(stderr.String(), "stdout was closed") || !strings.Contains(stderr.String(), "msg=stopped") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// The kernel sends a process's program identity with its first event only;
// every later event of the storm still names the executable and is
// explained as the first one is, from what eaddr kept.
func TestProgramIdentityOncePerProcess(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "off", "--diagnose=false")
	const n = 50
	eaddrtest.Flood(t, ns, n) // one python process, 50 failures
	var evs []eaddrtest.JSONEvent
	for deadline := time.Now().Add(10 * time.Second); len(evs) < n && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.Mu.Lock()
		evs = append(evs[:0], p.Events...)
		p.Mu.Unlock()
	}
	if len(evs) < n {
		t.Fatalf("%d of %d events within 10s", len(evs), n)
	}
	first := evs[0]
	if first.Process.Exe == "" || first.Explain == nil || first.Explain.Client == "" {
		t.Fatalf("the first event has no executable or client: %+v", first)
	}
	for i, ev := range evs {
		if ev.Process.PID != first.Process.PID || ev.Process.Exe != first.Process.Exe || ev.Explain == nil || ev.Explain.Client != first.Explain.Client {
			t.Fatalf("event %d of %d: pid %d exe %q client %v; the first: pid %d exe %q client %q", i+1, n, ev.Process.PID, ev.Process.Exe, ev.Explain, first.Process.PID, first.Process.Exe, first.Explain.Client)
		}
	}
	t.Logf("%d events of pid %d, all exe %q, client %q", len(evs), first.Process.PID, first.Process.Exe, first.Explain.Client)
}
