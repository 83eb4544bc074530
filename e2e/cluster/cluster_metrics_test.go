package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// metrics: a real Prometheus (Debian's) scrapes eaddr's /metrics on its
// pod's IP, port 9630 (the manifest's metrics port; hostNetwork is false),
// with honor_labels as docs/alerts.md's PodMonitor, and its HTTP API
// counts the workload's failures under that pod: eaddr_errors_total
// {namespace="e2e",pod=CLIENT} at least the failed wgets the pod had
// logged before the query began.
func (s *stories) metrics(t *testing.T) {
	out, _, err := s.k.Run(nil, "-n", "eaddr", "get", "pod", s.eaddrPod, "-o", "jsonpath={.status.podIP}")
	if err != nil || net.ParseIP(string(out)) == nil {
		t.Fatalf("eaddr's pod IP: %q %v", out, err)
	}
	target := net.JoinHostPort(string(out), "9630")
	prom := startPrometheus(t, target)
	failed := s.failedWgets(t)
	query := fmt.Sprintf(`sum(eaddr_errors_total{syscall="connect",errno="EADDRNOTAVAIL",namespace="e2e",pod=%q})`, s.client)
	var got map[string]float64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got = prom.query(t, query)
		if v, ok := got["{}"]; ok && v >= float64(failed) {
			t.Logf("Prometheus, scraping %s: %s = %v, the pod had logged %d failed wgets before", target, query, v, failed)
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Errorf("Prometheus, scraping %s: %s = %v after a minute, want >= %d (the failed wgets the pod logged)\nits targets: %s\neaddr's series: %v",
		target, query, got, failed, prom.targets(t), prom.query(t, "eaddr_errors_total"))
}

// failedWgets counts the failed wgets in the workload's log.
func (s *stories) failedWgets(t *testing.T) int {
	t.Helper()
	out, _, err := s.k.Run(nil, "-n", "e2e", "logs", s.client)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(out), "wget exit 1\n")
	if n == 0 {
		t.Fatalf("the workload's log has no failed wget:\n%s", out)
	}
	return n
}

// promServer is a running Prometheus.
type promServer struct{ base string }

// startPrometheus runs Debian's prometheus on a free loopback port, its
// tsdb in a temporary directory, scraping target's /metrics every second
// with honor_labels; it returns once Prometheus is ready. Cleanup kills it.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin := testenv.Program(t, "prometheus", "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: eaddr\n    honor_labels: true\n    static_configs: [{targets: [%q]}]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := pdeath.Start(cmd, nil); err != nil { // killed with the test binary, and not before
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logFile.Close() })
	s := &promServer{base: "http://" + addr}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus not ready at %s within a minute; its log:\n%s", s.base, lastN(string(b), 30))
		}
	}
}

// get decodes the data of a Prometheus API answer into v.
func (p *promServer) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("prometheus %s: %s %v %s", path, resp.Status, err, r.Error)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
}

// query returns an instant query's values by their labels' string.
func (p *promServer) query(t *testing.T, q string) map[string]float64 {
	t.Helper()
	var d struct {
		Result []struct {
			Metric map[string]string
			Value  [2]any
		}
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &d)
	out := map[string]float64{}
	for _, r := range d.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, r.Value)
		}
		labels, _ := json.Marshal(r.Metric)
		out[strings.ReplaceAll(string(labels), `"`, "")] = v
	}
	return out
}

// targets is the scrape targets' health, for a failure's message.
func (p *promServer) targets(t *testing.T) string {
	t.Helper()
	var d struct {
		ActiveTargets []struct{ ScrapeURL, Health, LastError string }
	}
	p.get(t, "/api/v1/targets", &d)
	b, _ := json.Marshal(d.ActiveTargets)
	return string(b)
}
