package main

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

	"sigs.k8s.io/yaml"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// This file runs a real Prometheus (Debian's, from the package that also
// gives promtool) for the alerts' live test (alerts_live_test.go): the
// shipped rules with their windows scaled down, scraping a running eaddr.

// shippedRules is deploy/prometheus-rules.yaml, the plain rule file eaddr
// ships (e2e/apiserver/alerts_test.go keeps it equal to the PrometheusRule's spec).
const shippedRules = "../../deploy/prometheus-rules.yaml"

var (
	rangeMinutes = regexp.MustCompile(`\[(\d+)m\]`)
	forMinutes   = regexp.MustCompile(`(?m)^(\s+for: )(\d+)m$`)
	// predict_linear's horizon, written in seconds as minutes * 60.
	horizonMinutes = regexp.MustCompile(`\b(\d+) \* 60\b`)
)

type liveRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
	For   string `json:"for"`
}

type liveRuleFile struct {
	Groups []struct {
		Rules []liveRule `json:"rules"`
	} `json:"groups"`
}

// scaleRules returns the rule file with every range window, `for:` and
// predict_linear horizon divided by factor: the same expressions on a
// clock that runs factor times faster. Nothing else changes.
func scaleRules(text string, factor int) string {
	sec := func(min string) int { m, _ := strconv.Atoi(min); return m * 60 / factor }
	text = rangeMinutes.ReplaceAllStringFunc(text, func(s string) string {
		return fmt.Sprintf("[%ds]", sec(rangeMinutes.FindStringSubmatch(s)[1]))
	})
	text = forMinutes.ReplaceAllStringFunc(text, func(s string) string {
		m := forMinutes.FindStringSubmatch(s)
		return fmt.Sprintf("%s%ds", m[1], sec(m[2]))
	})
	return horizonMinutes.ReplaceAllStringFunc(text, func(s string) string {
		return strconv.Itoa(sec(horizonMinutes.FindStringSubmatch(s)[1]))
	})
}

// scaledShippedRules reads the shipped rules, scales them, and checks that
// the scaling reached each of alerts: its for and windows changed, no
// minute left in its expression, and the expression otherwise the same.
func scaledShippedRules(t *testing.T, factor int, alerts ...string) string {
	t.Helper()
	orig, err := os.ReadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	scaled := scaleRules(string(orig), factor)
	before, after := rulesByAlert(t, orig), rulesByAlert(t, []byte(scaled))
	for _, a := range alerts {
		o, s := before[a], after[a]
		if o.Expr == "" {
			t.Fatalf("%s: no alert %s", shippedRules, a)
		}
		windows := rangeMinutes.MatchString(o.Expr) || horizonMinutes.MatchString(o.Expr)
		if o.For == s.For || s.For == "" || windows == (o.Expr == s.Expr) {
			t.Fatalf("%s: not scaled: for %q -> %q, expr %q -> %q", a, o.For, s.For, o.Expr, s.Expr)
		}
		if strings.Contains(s.Expr, "m]") || horizonMinutes.MatchString(s.Expr) {
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

func rulesByAlert(t *testing.T, text []byte) map[string]liveRule {
	t.Helper()
	var f liveRuleFile
	if err := yaml.Unmarshal(text, &f); err != nil {
		t.Fatalf("%s: %v", shippedRules, err)
	}
	out := map[string]liveRule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r
			}
		}
	}
	return out
}

// promServer is a running Prometheus.
type promServer struct {
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
}

// startPrometheus runs Debian's prometheus on 127.0.0.1 with a free port,
// its tsdb in a temporary directory, scraping target every second with
// honor_labels (as docs/alerts.md's PodMonitor) and evaluating rules every
// second. It returns once Prometheus is ready; cleanup kills it.
func startPrometheus(t *testing.T, rules, target string) *promServer {
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
	addr := freeLoopbackPort(t)
	s := &promServer{base: "http://" + addr}
	s.cmd = exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	log := startLogged(t, s.cmd) // killed and reaped at cleanup
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

// freeLoopbackPort returns 127.0.0.1:PORT with a port free a moment ago.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promAlert is one alert of /api/v1/alerts.
type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// get decodes the data of a Prometheus API answer into v.
func (s *promServer) get(t *testing.T, path string, v any) {
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

// firing returns the firing alerts named name whose labels include match.
func (s *promServer) firing(t *testing.T, name string, match map[string]string) []promAlert {
	t.Helper()
	var d struct{ Alerts []promAlert }
	s.get(t, "/api/v1/alerts", &d)
	var out []promAlert
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

// value returns the values of an instant query, by the labels' string.
func (s *promServer) value(t *testing.T, query string) map[string]float64 {
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
