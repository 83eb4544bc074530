package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// flood makes n failing connects toward 127.0.0.1:8080 from one process in
// ns and returns its pid; it takes as long as the machine needs.
func flood(t *testing.T, ns *netns.NS, n int) int {
	t.Helper()
	pid, _ := runLong(t, ns, python(t), "-c", fmt.Sprintf(`import socket
for i in range(%d):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", 8080))
    except OSError:
        pass
    s.close()
`, n))
	return pid
}

// totals parses the "stopped" line of a finished trace.
func totals(t *testing.T, stderr string) map[string]int {
	t.Helper()
	var line string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "msg=stopped") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no totals in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(` ([a-z_]+)=([0-9]+)`).FindAllStringSubmatch(line, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

func (p *traceProc) stop(t *testing.T) map[string]int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("eaddr trace did not close its stdout within 30s of SIGINT")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		s := p.stderr.String()
		p.mu.Unlock()
		if strings.Contains(s, "msg=stopped") {
			return totals(t, s)
		}
	}
	t.Fatal("no totals after SIGINT")
	return nil
}

// A flood into a deliberately tiny ring that nobody reads (eaddr is
// stopped meanwhile, so the ring is full after a dozen events and the rest
// is lost, at any speed): every generated failure is either read or counted
// lost by the kernel, and every read one is delivered, suppressed or counted
// dropped: nothing disappears without a counter.
func TestLossAccounting(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--ring-size", strconv.Itoa(os.Getpagesize()), "--rate-limit", "0", "--diagnose=false")
	p.lossOK = true
	const n = 2000
	resume := p.pause(t)
	flood(t, ns, n)
	resume()
	c := p.stop(t)
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
	p.mu.Lock()
	lines := len(p.events)
	p.mu.Unlock()
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "20/s", "--summary-interval", summaries, "--explain", "off", "--diagnose=false")
	const n = 5000
	flood(t, ns, n)
	// At 20/s the bucket has a token again 50 ms after the storm, however
	// long the storm took: the next failure passes and carries the count.
	time.Sleep(1200 * time.Millisecond)
	last := flood(t, ns, 1)
	if evs := p.forPID(last, 1, 30*time.Second); len(evs) != 1 {
		t.Fatalf("the failure after the storm was not written: %+v", evs)
	}
	if summaries != "0" {
		// Summaries come at eaddr's ticks, however late those come on a
		// busy machine: wait for one written after the carrying event.
		p.mu.Lock()
		seen := len(p.summaries)
		p.mu.Unlock()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p.mu.Lock()
			more := len(p.summaries) > seen
			p.mu.Unlock()
			if more {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no summary record within 30s of the last event (--summary-interval 300ms)")
			}
		}
	}
	c := p.stop(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	var carried int
	for _, ev := range p.events {
		carried += ev.Suppressed
	}
	var summed int
	for _, s := range p.summaries {
		m := regexp.MustCompile(`"suppressed":([0-9]+)`).FindStringSubmatch(s)
		n, _ := strconv.Atoi(m[1])
		summed += n
	}
	t.Logf("%d failures at --rate-limit 20/s: %d events written, %d suppressed; events carried %d, summaries %d", n+1, len(p.events), c["suppressed"], carried, summed)
	if c["events"] != n+1 || c["suppressed"]+c["delivered"] != c["events"] || len(p.events) > 100 {
		t.Errorf("totals %v with %d lines", c, len(p.events))
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "20/s", "--comm", "no-such-comm",
		"--metrics-addr", "127.0.0.1:0", "--explain", "off", "--diagnose=false")
	base := p.metricsURL(t)
	const n = 5000
	flood(t, ns, n)
	var keys float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && keys <= 0; time.Sleep(100 * time.Millisecond) {
		keys = cacheGauge(scrape(t, base), "eaddr_cache_entries", "rate_limit_keys")
	}
	c := p.stop(t)
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	testenv.RequireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(eaddrBin, "trace", "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "0", "--diagnose=false", "--metrics-addr", "127.0.0.1:0")
	cmd.Stdout = w // nobody reads r: the pipe fills and stays full
	log := startLogged(t, cmd)
	w.Close()
	log.waitFor(t, "attached", 30*time.Second)
	const n = 20000
	flood(t, ns, n)
	outputQueueFull(t, (&traceProc{stderr: log}).metricsURL(t))
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	if err := log.wait(t, 15*time.Second, "a stalled stdout kept eaddr from stopping"); err != nil {
		t.Errorf("exit: %v", err)
	}
	c := totals(t, log.String())
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
		fams := scrape(t, base)
		made := cacheGauge(fams, "eaddr_cache_entries", "output_batches")
		bound := cacheGauge(fams, "eaddr_cache_capacity", "output_batches")
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	testenv.RequireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(eaddrBin, "trace", "--netns", strconv.FormatUint(ns.Inode(), 10))
	cmd.Stdout = w
	stderr := startLogged(t, cmd)
	w.Close()
	stderr.waitFor(t, "attached", 30*time.Second)
	r.Close() // the consumer goes away
	failConnect(t, ns, "127.0.0.1")
	if err := stderr.wait(t, 10*time.Second, "eaddr did not stop when its stdout was closed"); err != nil {
		t.Errorf("exit after EPIPE: %v (want 0)", err)
	}
	if !strings.Contains(stderr.String(), "stdout was closed") || !strings.Contains(stderr.String(), "msg=stopped") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// stderrLog collects the stderr of a process line by line; String and the
// waits may be called while it is still being written.
type stderrLog struct {
	mu     sync.Mutex
	b      strings.Builder
	done   chan struct{} // closed at EOF
	exited chan struct{} // closed when cmd.Wait returned, with err
	err    error
}

// startLogged starts cmd and reaps it itself, so cmd.Stdout must not be a
// StdoutPipe (Wait would close it under its reader): give it an os.Pipe.
// It starts cmd with its stderr read into a stderrLog through a
// pipe of its own, reaps it in one place (stderrLog.wait), and kills it when
// the test ends.
func startLogged(t *testing.T, cmd *exec.Cmd) *stderrLog {
	t.Helper()
	testenv.RequireRoot(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := pdeath.Start(cmd, nil); err != nil { // killed with the test binary, and not before
		pr.Close()
		pw.Close()
		t.Fatal(err)
	}
	pw.Close()
	l := &stderrLog{done: make(chan struct{}), exited: make(chan struct{})}
	go func() { l.err = cmd.Wait(); close(l.exited) }()
	go func() {
		defer close(l.done)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			l.mu.Lock()
			l.b.WriteString(s.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-l.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("eaddr (pid %d) not reaped 10s after SIGKILL", cmd.Process.Pid)
		}
		pr.Close()
	})
	return l
}

func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wait returns cmd.Wait's error once the process has exited and its stderr
// is read to the end; it fails the test with msg when that takes over d.
func (l *stderrLog) wait(t *testing.T, d time.Duration, msg string) error {
	t.Helper()
	deadline := time.After(d)
	for _, c := range []chan struct{}{l.exited, l.done} {
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("%s (waited %v):\n%s", msg, d, l.String())
		}
	}
	return l.err
}

// waitFor fails the test unless s appears within d.
func (l *stderrLog) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.done:
			if strings.Contains(l.String(), s) {
				return
			}
			t.Fatalf("stderr ended without %q:\n%s", s, l.String())
		case <-deadline:
			t.Fatalf("no %q on stderr within %v:\n%s", s, d, l.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The kernel sends a process's program identity with its first event only;
// every later event of the storm still names the executable and is
// explained as the first one is, from what eaddr kept.
func TestProgramIdentityOncePerProcess(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "off", "--diagnose=false")
	const n = 50
	flood(t, ns, n) // one python process, 50 failures
	var evs []jsonEvent
	for deadline := time.Now().Add(10 * time.Second); len(evs) < n && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		evs = append(evs[:0], p.events...)
		p.mu.Unlock()
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
