package eaddrtest

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricsURL waits for the "serving metrics" log line and returns its URL.
func (p *TraceProc) MetricsURL(t *testing.T) string {
	t.Helper()
	re := regexp.MustCompile(`serving metrics"? url=(http://\S+)/metrics`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.Mu.Lock()
		m := re.FindStringSubmatch(p.Stderr.String())
		p.Mu.Unlock()
		if m != nil {
			return m[1]
		}
	}
	t.Fatal("no metrics address logged")
	return ""
}

// CacheGauge is family{cache=name} in fams (eaddr_cache_entries or
// _capacity), -1 when it has none.
func CacheGauge(fams map[string]*dto.MetricFamily, family, name string) float64 {
	for _, m := range fams[family].GetMetric() {
		if Labels(m)["cache"] == name {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func Scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

func Labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// ScrapeSums is each family's values summed over its series.
func ScrapeSums(t *testing.T, base string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, f := range Scrape(t, base) {
		for _, m := range f.GetMetric() {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
