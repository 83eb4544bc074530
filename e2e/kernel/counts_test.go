package kernel

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// stormC makes N failing connect()s to 127.0.0.1:8080 as fast as it can
// and prints how many failed with EADDRNOTAVAIL.
const stormC = `#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
	long n = atol(argv[1]), failed = 0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(8080), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	for (long i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0) { perror("socket"); return 1; }
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EADDRNOTAVAIL)
			failed++;
		close(s);
	}
	printf("%ld\n", failed);
	return 0;
}
`

// storm builds stormC and runs it in ns; it returns how many connect()s
// failed with EADDRNOTAVAIL.
func storm(t *testing.T, ns *netns.NS, n int) int {
	t.Helper()
	bin := testenv.CompileCSource(t, "gcc", "gcc", filepath.Join(t.TempDir(), "storm"), stormC)
	// Not runInNS: its 10 s bound is a client's, and a storm on a busy node
	// takes longer; 60 s still fails a hang.
	cmd := exec.Command(bin, strconv.Itoa(n))
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("storm: %v", err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the storm generator did not finish within 60s")
	}
	out := stdout.String()
	failed, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("storm printed %q", out)
	}
	return failed
}

// eaddr_errors_total counts every failure the kernel reported, those the
// rate limiter held back from the output included: in a storm of 200k,
// errors_total equals the events read and, with the kernel's losses,
// what the generator made. With a one-page ring and eaddr stopped during
// the storm, the ring is full after a dozen events and the kernel loses
// the rest of what the limiter lets through (its burst of 100 alone is
// more than a page holds), and the sum still holds.
func TestErrorsTotalCountsSuppressed(t *testing.T) {
	for _, ring := range []string{strconv.Itoa(4 << 20), strconv.Itoa(os.Getpagesize())} {
		t.Run("ring-"+ring, func(t *testing.T) { testErrorsTotal(t, ring) })
	}
}

func testErrorsTotal(t *testing.T, ring string) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--metrics-addr", "127.0.0.1:0", "--rate-limit", "100/s", "--ring-size", ring)
	p.LossOK = true // a storm may overrun the ring; losses are counted and checked below
	base := p.MetricsURL(t)
	onePage := ring == strconv.Itoa(os.Getpagesize())
	resume := func() {}
	if onePage {
		resume = p.Pause(t) // nobody reads the ring: it fills, the rest is lost
	}
	const n = 200000
	generated := storm(t, ns, n)
	resume()
	if generated != n {
		t.Fatalf("the generator failed %d of %d connects with EADDRNOTAVAIL", generated, n)
	}
	// The counters reach their final values at eaddr's next ticks, however
	// late those come on a busy machine: wait for the sums to hold (30 s
	// fails a counter that never gets there), then check each.
	var m map[string]float64
	var errs, events, lost, suppressed float64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m = eaddrtest.ScrapeSums(t, base)
		errs, events, lost, suppressed = m["eaddr_errors_total"], m["eaddr_events_total"], m["eaddr_lost_events_total"], m["eaddr_suppressed_events_total"]
		if errs == events && errs+lost == float64(generated) && suppressed > 0 {
			break
		}
	}
	t.Logf("storm of %d failures, %s-byte ring: errors_total %v, events_total %v, lost %v, suppressed %v", generated, ring, errs, events, lost, suppressed)
	if suppressed == 0 {
		t.Errorf("the rate limiter held nothing back: the test proves nothing")
	}
	if onePage && lost == 0 {
		t.Errorf("a one-page ring, not read during a storm of %d failures, lost nothing", generated)
	}
	if errs != events {
		t.Errorf("eaddr_errors_total %v != eaddr_events_total %v: failures reported by the kernel went uncounted", errs, events)
	}
	if errs+lost != float64(generated) {
		t.Errorf("eaddr_errors_total %v + lost %v != %d generated", errs, lost, generated)
	}
	c := p.Stop(t)
	if float64(c["events"]) != events || float64(c["lost"]) != lost {
		t.Errorf("stopped line %v disagrees with the metrics: events %v, lost %v", c, events, lost)
	}
}

// slowReader reads r in small pieces with pauses while reading is set,
// and not at all otherwise; it keeps everything it read.
type slowReader struct {
	mu      sync.Mutex
	reading bool
	got     bytes.Buffer
}

func (s *slowReader) run(r io.Reader) {
	buf := make([]byte, 1500)
	for {
		s.mu.Lock()
		reading := s.reading
		s.mu.Unlock()
		if !reading {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		n, err := r.Read(buf)
		s.mu.Lock()
		s.got.Write(buf[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// gotLine: a whole line was read.
func (s *slowReader) gotLine() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.IndexByte(s.got.Bytes(), '\n') >= 0
}

func (s *slowReader) set(reading bool) {
	s.mu.Lock()
	s.reading = reading
	s.mu.Unlock()
}

// With a reader that reads slowly, then not at all, eaddr stopped by
// SIGINT writes only whole lines, and its totals say exactly what the
// reader got: delivered == lines received, delivered + dropped == written.
func TestSlowReaderWholeLines(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	testenv.RequireRoot(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(eaddrtest.EaddrBin, "trace", "--netns", strconv.FormatUint(ns.Inode(), 10), "--rate-limit", "0", "--summary-interval", "0")
	cmd.Stdout = w
	log := eaddrtest.StartLogged(t, cmd)
	w.Close()
	log.WaitFor(t, "attached", 30*time.Second)
	rd := &slowReader{reading: true}
	readerDone := make(chan struct{})
	go func() { rd.run(r); close(readerDone) }()
	const n = 3000
	eaddrtest.Flood(t, ns, n)
	// Slow reading until a line came through (however long eaddr takes on
	// this machine), then stuck: the 3000 lines (about 4 MB) do not fit the
	// pipe and what a slow reader takes, so some are left for the stop to
	// drop, and some were delivered.
	for deadline := time.Now().Add(60 * time.Second); !rd.gotLine(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no line reached the slow reader within 60s")
		}
	}
	rd.set(false) // then stuck
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	if err := log.Wait(t, 20*time.Second, "a stuck reader kept eaddr from stopping"); err != nil {
		t.Errorf("exit: %v", err)
	}
	rd.set(true) // what eaddr left in the pipe counts as received
	select {
	case <-readerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the pipe did not reach EOF after eaddr exited")
	}
	c := eaddrtest.Totals(t, log.String())
	got := rd.got.Bytes()
	lines := bytes.Split(got, []byte("\n"))
	if last := lines[len(lines)-1]; len(last) != 0 {
		t.Errorf("the output ends in a cut line of %d bytes: %.80q", len(last), last)
	}
	lines = lines[:len(lines)-1]
	maxLen := 0
	for i, l := range lines {
		maxLen = max(maxLen, len(l))
		var ev map[string]any
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Errorf("line %d of %d is not JSON (%v): %.120q", i+1, len(lines), err, l)
			break
		}
	}
	t.Logf("%d failures, slow then stuck reader: received %d lines (%d bytes, longest %d); totals %v", n, len(lines), len(got), maxLen, c)
	if c["dropped"] == 0 || c["delivered"] == 0 {
		t.Errorf("dropped %d, delivered %d: the reader was not slow enough to test anything", c["dropped"], c["delivered"])
	}
	if c["delivered"] != len(lines) {
		t.Errorf("delivered=%d but the reader received %d lines", c["delivered"], len(lines))
	}
	if c["delivered"]+c["dropped"] != c["written"] {
		t.Errorf("delivered %d + dropped %d != written %d", c["delivered"], c["dropped"], c["written"])
	}
	if c["written"]+c["filtered"]+c["suppressed"] != c["events"] || c["events"]+c["lost"] != n {
		t.Errorf("totals %v do not add up to %d failures", c, n)
	}
}
