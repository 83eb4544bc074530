package kernel

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/tracer"
	dto "github.com/prometheus/client_model/go"
)

// A running tracer is scraped over real HTTP: errors by syscall/errno/pod,
// the port gauges from the diagnosis, losses, Go and process collectors,
// and /healthz; past --metrics-max-series, pods go to the "other" series.
func TestMetrics(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	eaddrtest.Sandbox(t, ns)
	// The cgroup exists before the tracer starts, as a pod's does before it
	// fails: a cgroup made later is learned on the next walk (at most one a
	// second), which a process that exits at once may not wait for.
	_, leaf, _, _ := eaddrtest.PodCgroup(t)
	// The port gauges come from the diagnosis: a minute's wait for the
	// snapshot, so that they do not depend on how busy the machine is.
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--metrics-addr", "127.0.0.1:0", "--metrics-max-series", "1", "--diagnose-wait", "1m",
		"--ports-interval", "0") // the gauges of the diagnosis alone (the sampler: pipeline's TestPortSampler*)
	base := p.MetricsURL(t)
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	for range 3 {
		eaddrtest.FailConnect(t, ns, "127.0.0.1")
	}
	// A second "pod": the same failure from a kubepods-style cgroup, which
	// overflows the one-series cap into "other".
	eaddrtest.FailInCgroup(t, ns, leaf)
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		fams = eaddrtest.Scrape(t, base)
		if f := fams["eaddr_errors_total"]; f != nil && len(f.GetMetric()) == 2 && fams["eaddr_ephemeral_ports_in_use"] != nil {
			break
		}
	}
	errs := fams["eaddr_errors_total"]
	if errs == nil || len(errs.GetMetric()) != 2 {
		t.Fatalf("eaddr_errors_total: %v", errs)
	}
	got := map[string]float64{}
	for _, m := range errs.GetMetric() {
		l := eaddrtest.Labels(m)
		if l["syscall"] != "connect" || l["errno"] != "EADDRNOTAVAIL" {
			t.Errorf("labels %v", l)
		}
		got[l["pod"]] = m.GetCounter().GetValue()
	}
	if got[""] != 3 || got["other"] != 1 {
		t.Errorf("errors by pod %v, want 3 outside pods and 1 in \"other\"", got)
	}
	for name, want := range map[string]float64{"eaddr_ephemeral_ports_in_use": 2, "eaddr_ephemeral_ports_usable": 2} {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 || f.GetMetric()[0].GetGauge().GetValue() != want || eaddrtest.Labels(f.GetMetric()[0])["netns"] != strconv.FormatUint(ns.Inode(), 10) ||
			(name == "eaddr_ephemeral_ports_in_use" && eaddrtest.Labels(f.GetMetric()[0])["destination"] != "127.0.0.1:8080") {
			t.Errorf("%s: %v, want %v for netns %d", name, f, want, ns.Inode())
		}
	}
	for _, name := range []string{"eaddr_lost_events_total", "eaddr_async_unseen_total", "eaddr_events_total", "go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if v := fams["eaddr_lost_events_total"].GetMetric()[0].GetCounter().GetValue(); v != 0 {
		t.Errorf("lost %v", v)
	}
	if f := fams["eaddr_bpf_runs_skipped_total"]; len(f.GetMetric()) != len(tracer.Programs) {
		t.Errorf("eaddr_bpf_runs_skipped_total: %v; want a series for each of the %d programs", f, len(tracer.Programs))
	}
}

// With --summary-interval, the stream carries summary records with the
// counts per errno of the interval and the losses.
func TestSummaryRecords(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--summary-interval", "500ms")
	for range 2 {
		eaddrtest.FailConnect(t, ns, "127.0.0.1")
	}
	var sums []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p.Mu.Lock()
		sums = append([]string(nil), p.Summaries...)
		p.Mu.Unlock()
		total := 0
		for _, s := range sums {
			var rec struct {
				Errnos map[string]int `json:"errnos"`
			}
			json.Unmarshal([]byte(s), &rec)
			total += rec.Errnos["EADDRNOTAVAIL"]
		}
		if total == 2 && len(sums) >= 2 {
			return
		}
	}
	t.Errorf("summaries %q, want them to count 2 EADDRNOTAVAIL in all", sums)
}
