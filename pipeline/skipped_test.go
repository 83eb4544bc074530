package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/pod/kube"
	"github.com/eaddr/eaddr/tracer"
)

// Runs of eaddr's programs the kernel skipped (its recursion check) are
// in the stopped line, summed, and in eaddr_bpf_runs_skipped_total by
// program; with none, the stopped line does not name them.
func TestRunsSkipped(t *testing.T) {
	g := newWaitsRig(t, Config{})
	g.withMetrics(t)
	src := &fakeSource{}
	g.r.t = src
	if attrs := g.r.stoppedAttrs(g.r.stats()); slices.Contains(attrs, any("runs_skipped")) {
		t.Errorf("stopped line %v names runs_skipped with none", attrs)
	}
	src.stats.RunsSkipped = [len(tracer.Programs)]uint64{2, 0, 0, 5} // exit_connect, async_state
	attrs := g.r.stoppedAttrs(g.r.stats())
	if i := slices.Index(attrs, any("runs_skipped")); i < 0 || attrs[i+1] != uint64(7) {
		t.Errorf("stopped line %v; want runs_skipped 7", attrs)
	}
	g.r.updateMetrics(src.stats)
	fams, err := g.r.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "eaddr_bpf_runs_skipped_total" {
			continue
		}
		for _, m := range f.Metric {
			got[labelValue(m, "program")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"exit_connect": 2, "exit_bind": 0, "async_error": 0, "async_state": 5, "async_destroy": 0, "exit_getsockopt": 0}
	if len(got) != len(want) {
		t.Fatalf("eaddr_bpf_runs_skipped_total %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("eaddr_bpf_runs_skipped_total{program=%q} = %v; want %v", k, got[k], v)
		}
	}
}

// withMetrics gives the rig metrics, and the runtime resolver (no socket)
// and pod mapper that updateMetrics reads.
func (g *waitsRig) withMetrics(t *testing.T) {
	g.r.met = newMetrics(10, 10, false)
	g.r.names = kube.NewResolver("unix:///nonexistent", false, nil)
	t.Cleanup(func() { g.r.names.Close() })
	g.r.pods = pod.NewPodMapper(g.r.names, 0)
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A summary record gives the skipped runs of its interval and in total,
// and a total read lower than at the last record (a failed read) gives 0
// for the interval, not a wrapped count.
func TestSummaryCountsSkippedRuns(t *testing.T) {
	s := summary{enabled: true}
	now := time.Unix(1_700_000_000, 0)
	var lines []string
	for _, tot := range []totals{{lost: 4, skipped: 5}, {lost: 6, skipped: 7}, {lost: 0, skipped: 0}} {
		lines = append(lines, string(s.append(nil, now, "n", tot)))
	}
	for i, want := range []string{
		`"lost":4,"lost_total":4,"dropped":0,"dropped_total":0,"suppressed":0,"suppressed_total":0,"runs_skipped":5,"runs_skipped_total":5}`,
		`"lost":2,"lost_total":6,"dropped":0,"dropped_total":0,"suppressed":0,"suppressed_total":0,"runs_skipped":2,"runs_skipped_total":7}`,
		`"lost":0,"lost_total":0,"dropped":0,"dropped_total":0,"suppressed":0,"suppressed_total":0}`,
	} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("record %d: %s\nwant it to end %s", i, lines[i], want)
		}
	}
}
