package kernel

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// The live test's clock: the shipped rules' windows divided by liveScale
// (15m ranges and horizon -> 30s, for 5m -> 10s), and a netns of
// liveUsable ports filled by one connection every liveFillEvery (6 a
// second). Predicted then fires around 220 held ports plus its for (about
// 280 held, 47 s in), High at 80% plus its for (about 380 held, 63 s in),
// before the range is full; the test keeps liveMargin ports free whatever
// happens, so no connect() can fail. Prometheus scrapes and evaluates every
// second (eaddrtest.StartPrometheus) and eaddr samples every second, so the
// scaled for is ten evaluations. The fill rate is scaled with the windows
// (it is 12 connections a minute in the shipped rules' time), so the ports
// held when each alert fires do not depend on the scale.
const (
	liveScale     = 30
	liveLo        = 40000
	liveUsable    = 400 // 40000-40399: an even count, so the kernel tries all
	liveMargin    = 5
	liveFillEvery = time.Second / 6
	liveListen    = "127.0.0.1:8080" // outside the range
)

// TestAlertsFireBeforeFailure: a real Prometheus, loaded with the shipped
// rules (windows scaled down) and scraping eaddr trace, fires
// EaddrEphemeralPortsExhaustionPredicted and then EaddrEphemeralPortsHigh
// for a netns that slowly fills its ports toward one destination, while no
// connect() has failed: eaddr reported no event and counted no error, and
// ss in the netns still finds free ports of the range.
func TestAlertsFireBeforeFailure(t *testing.T) {
	testenv.RequireRoot(t)
	const predicted, high = "EaddrEphemeralPortsExhaustionPredicted", "EaddrEphemeralPortsHigh"
	rules := eaddrtest.ScaledShippedRules(t, liveScale, predicted, high)
	ns, fill := fillingNetns(t)
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--metrics-addr", "127.0.0.1:0",
		"--ports-interval", "1s")
	metrics := p.MetricsURL(t)
	prom := eaddrtest.StartPrometheus(t, rules, strings.TrimPrefix(metrics, "http://"))
	want := map[string]string{"netns": strconv.FormatUint(ns.Inode(), 10), "destination": liveListen}

	start := time.Now()
	fired := map[string]int{} // alert -> ports held when it was first seen firing
	deadline := start.Add(10 * time.Minute)
	tick := time.NewTicker(liveFillEvery)
	defer tick.Stop()
	for ; len(fired) < 2; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("after %v and %d ports held (of %d): firing %v; in use per Prometheus %v",
				time.Since(start).Round(time.Second), fill.held(), liveUsable, fired,
				prom.Value(t, "eaddr_ephemeral_ports_in_use"))
		}
		if fill.held() < liveUsable-liveMargin {
			fill.dialOne(t)
		}
		for _, name := range []string{predicted, high} {
			if _, done := fired[name]; done || len(prom.Firing(t, name, want)) == 0 {
				continue
			}
			fired[name] = fill.held()
			t.Logf("%s firing after %v, %d of %d ports held", name, time.Since(start).Round(time.Second), fired[name], liveUsable)
			noFailureYet(t, p, metrics, ns)
		}
	}
	if fired[predicted] >= liveUsable-liveMargin {
		t.Errorf("%s fired only once the range was full (%d held): it predicted nothing", predicted, fired[predicted])
	}
}

// TestScaledShippedRules: the live test's scaling reaches the port alerts'
// windows and changes nothing else in their expressions (no root needed).
func TestScaledShippedRules(t *testing.T) {
	eaddrtest.ScaledShippedRules(t, liveScale, "EaddrEphemeralPortsExhaustionPredicted", "EaddrEphemeralPortsHigh")
	if got := eaddrtest.ScaleRules("rate(x[5m]) and predict_linear(y[15m], 15 * 60)\n    for: 5m\n", 10); got != "rate(x[30s]) and predict_linear(y[90s], 90)\n    for: 30s\n" {
		t.Errorf("scaleRules: %q", got)
	}
}

// noFailureYet: eaddr saw no failed call (no event, eaddr_errors_total
// absent or 0) and ss in ns finds ports of the range still free.
func noFailureYet(t *testing.T, p *eaddrtest.TraceProc, metrics string, ns *netns.NS) {
	t.Helper()
	p.Mu.Lock()
	events := append([]string(nil), p.Lines...)
	p.Mu.Unlock()
	if len(events) > 0 {
		t.Fatalf("eaddr reported failures before the alert fired:\n%s", strings.Join(events, "\n"))
	}
	if f := eaddrtest.Scrape(t, metrics)["eaddr_errors_total"]; f != nil {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Fatalf("eaddr_errors_total%v = %v before the alert fired", eaddrtest.Labels(m), v)
			}
		}
	}
	used := eaddrtest.SsCount(t, ns, "established", liveListen, liveLo, liveLo+liveUsable-1)
	if used >= liveUsable {
		t.Fatalf("ss: %d ports of %d in use toward %s when the alert fired: none left", used, liveUsable, liveListen)
	}
	t.Logf("ss: %d of %d ports in use toward %s, no failure yet", used, liveUsable, liveListen)
}

// filler holds connections open toward a listener in its netns.
type filler struct {
	ns       *netns.NS
	mu       sync.Mutex
	conns    []net.Conn // both sides
	clients  int
	listener net.Listener
}

// fillingNetns makes a netns with ip_local_port_range of liveUsable ports,
// a live process in it (the sampler samples netns that have one) and a
// listener on liveListen that keeps what it accepts. Cleanup closes it all.
func fillingNetns(t *testing.T) (*netns.NS, *filler) {
	t.Helper()
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", liveLo, liveLo+liveUsable-1)); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "3600")
	if err := ns.Start(sleep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	l, err := ns.Listen("tcp4", liveListen)
	if err != nil {
		t.Fatal(err)
	}
	f := &filler{ns: ns, listener: l}
	t.Cleanup(f.close)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
		}
	}()
	return ns, f
}

// dialOne opens one more connection and keeps it; a failure (the range is
// never filled, so none is expected) fails the test.
func (f *filler) dialOne(t *testing.T) {
	t.Helper()
	c, err := f.ns.Dial("tcp4", liveListen)
	if errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("connection %d failed with EADDRNOTAVAIL: the test filled the range", f.held()+1)
	}
	if err != nil {
		t.Fatalf("connection %d: %v", f.held()+1, err)
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.clients++
	f.mu.Unlock()
}

func (f *filler) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clients
}

func (f *filler) close() {
	f.listener.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}
