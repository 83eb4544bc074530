package eaddrtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"sigs.k8s.io/yaml"
)

// ShippedRules is deploy/prometheus-rules.yaml, the plain rule file eaddr
// ships (e2e/apiserver/alerts_test.go keeps it equal to the PrometheusRule's spec).
var ShippedRules = filepath.Join(testenv.Root(), "deploy", "prometheus-rules.yaml")

var (
	RangeMinutes = regexp.MustCompile(`\[(\d+)m\]`)
	ForMinutes   = regexp.MustCompile(`(?m)^(\s+for: )(\d+)m$`)
	// predict_linear's horizon, written in seconds as minutes * 60.
	HorizonMinutes = regexp.MustCompile(`\b(\d+) \* 60\b`)
)

type LiveRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
	For   string `json:"for"`
}

type LiveRuleFile struct {
	Groups []struct {
		Rules []LiveRule `json:"rules"`
	} `json:"groups"`
}

// ScaleRules returns the rule file with every range window, `for:` and
// predict_linear horizon divided by factor: the same expressions on a
// clock that runs factor times faster. Nothing else changes.
func ScaleRules(text string, factor int) string {
	sec := func(min string) int { m, _ := strconv.Atoi(min); return m * 60 / factor }
	text = RangeMinutes.ReplaceAllStringFunc(text, func(s string) string {
		return fmt.Sprintf("[%ds]", sec(RangeMinutes.FindStringSubmatch(s)[1]))
	})
	text = ForMinutes.ReplaceAllStringFunc(text, func(s string) string {
		m := ForMinutes.FindStringSubmatch(s)
		return fmt.Sprintf("%s%ds", m[1], sec(m[2]))
	})
	return HorizonMinutes.ReplaceAllStringFunc(text, func(s string) string {
		return strconv.Itoa(sec(HorizonMinutes.FindStringSubmatch(s)[1]))
	})
}

// ScaledShippedRules reads the shipped rules, scales them, and checks that
// the scaling reached each of alerts: its for and windows changed, no
// minute left in its expression, and the expression otherwise the same.
func ScaledShippedRules(t *testing.T, factor int, alerts ...string) string {
	t.Helper()
	orig, err := os.ReadFile(ShippedRules)
	if err != nil {
		t.Fatal(err)
	}
	scaled := ScaleRules(string(orig), factor)
	before, after := RulesByAlert(t, orig), RulesByAlert(t, []byte(scaled))
	for _, a := range alerts {
		o, s := before[a], after[a]
		if o.Expr == "" {
			t.Fatalf("%s: no alert %s", ShippedRules, a)
		}
		windows := RangeMinutes.MatchString(o.Expr) || HorizonMinutes.MatchString(o.Expr)
		if o.For == s.For || s.For == "" || windows == (o.Expr == s.Expr) {
			t.Fatalf("%s: not scaled: for %q -> %q, expr %q -> %q", a, o.For, s.For, o.Expr, s.Expr)
		}
		if strings.Contains(s.Expr, "m]") || HorizonMinutes.MatchString(s.Expr) {
			t.Fatalf("%s: a window in minutes is left in the scaled %q", a, s.Expr)
		}
		strip := regexp.MustCompile(`\[\d+[ms]\]|\b\d+ \* 60\b|\b\d+\b`)
		if strip.ReplaceAllString(o.Expr, "#") != strip.ReplaceAllString(s.Expr, "#") {
			t.Fatalf("%s: the scaling changed more than durations:\n%s\n%s", a, o.Expr, s.Expr)
		}
		t.Logf("%s, scaled 1/%d: for %s\n%s", a, factor, s.For, s.Expr)
	}
	return scaled
}

func RulesByAlert(t *testing.T, text []byte) map[string]LiveRule {
	t.Helper()
	var f LiveRuleFile
	if err := yaml.Unmarshal(text, &f); err != nil {
		t.Fatalf("%s: %v", ShippedRules, err)
	}
	out := map[string]LiveRule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r
			}
		}
	}
	return out
}

// PromServer is a running Prometheus.
type PromServer struct {
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
}

// StartPrometheus runs Debian's prometheus on 127.0.0.1 with a free port,
// its tsdb in a temporary directory, scraping target every second with
// honor_labels (as docs/alerts.md's PodMonitor) and evaluating rules every
// second. It returns once Prometheus is ready; cleanup kills it.
func StartPrometheus(t *testing.T, rules, target string) *PromServer {
	t.Helper()
	bin := testenv.Program(t, "prometheus", "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
  - job_name: eaddr
    honor_labels: true
    static_configs: [{targets: [%q]}]
`, target)
	for name, text := range map[string]string{"prometheus.yml": cfg, "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := FreeLoopbackPort(t)
	s := &PromServer{base: "http://" + addr}
	s.cmd = exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	log := StartLogged(t, s.cmd) // killed and reaped at cleanup
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s within 2 minutes; its log:\n%s", s.base, log.String())
		}
	}
}

// FreeLoopbackPort returns 127.0.0.1:PORT with a port free a moment ago.
func FreeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// PromAlert is one alert of /api/v1/alerts.
type PromAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// get decodes the data of a Prometheus API answer into v.
func (s *PromServer) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("prometheus %s: %s %v %s", path, resp.Status, err, r.Error)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("prometheus %s: %v", path, err)
	}
}

// Firing returns the firing alerts named name whose labels include match.
func (s *PromServer) Firing(t *testing.T, name string, match map[string]string) []PromAlert {
	t.Helper()
	var d struct{ Alerts []PromAlert }
	s.get(t, "/api/v1/alerts", &d)
	var out []PromAlert
next:
	for _, a := range d.Alerts {
		if a.State != "firing" || a.Labels["alertname"] != name {
			continue
		}
		for k, v := range match {
			if a.Labels[k] != v {
				continue next
			}
		}
		out = append(out, a)
	}
	return out
}

// Value returns the values of an instant query, by the labels' string.
func (s *PromServer) Value(t *testing.T, query string) map[string]float64 {
	t.Helper()
	var d struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	s.get(t, "/api/v1/query?query="+url.QueryEscape(query), &d)
	out := map[string]float64{}
	for _, r := range d.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", query, r.Value)
		}
		out[fmt.Sprint(r.Metric)] = v
	}
	return out
}
