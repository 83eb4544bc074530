package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

var update = flag.Bool("update", false, "rewrite prometheus-rules.yaml from prometheusrule.yaml's spec")

var monitoringV1 = schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}

// prometheusRule is the part of the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1) that eaddr uses, mirrored by hand: decoded strictly,
// a field the mirror lacks is an error here even where the CRD has it
// (partial_response_strategy, limit, keep_firing_for...). Add it here before
// using it.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ruleFile `json:"spec"`
}

// ruleFile is both the PrometheusRule's spec and a plain Prometheus rule file.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (r *prometheusRule) DeepCopyObject() runtime.Object {
	j, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	var c prometheusRule
	if err := json.Unmarshal(j, &c); err != nil {
		panic(err)
	}
	return &c
}

// theRule returns deploy/prometheusrule.yaml's PrometheusRule.
func theRule(t *testing.T) *prometheusRule {
	t.Helper()
	data, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStream("prometheusrule.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	r := find[*prometheusRule](objs)
	if len(r) != 1 {
		t.Fatalf("prometheusrule.yaml: %d PrometheusRules, want 1", len(r))
	}
	return r[0]
}

const plainHeader = `# Generated from the spec of deploy/prometheusrule.yaml by
# ` + "`go test ./e2e/apiserver -run TestPrometheusRuleFilesInStep -update`" + `: edit that file, not this one.
# eaddr's alerts for a Prometheus without the Operator: add this file to rule_files in
# prometheus.yml. What each alert means and what to do: docs/alerts.md.
`

// plainRules derives the plain rule file from the PrometheusRule's text: the
// lines of its spec (the last top-level key), two spaces less indented, comments
// included, so the two files read alike.
func plainRules(crd []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(crd), "\n")
	start := slices.Index(lines, "spec:\n")
	if start < 0 {
		return nil, fmt.Errorf("no top-level \"spec:\" line")
	}
	var b bytes.Buffer
	b.WriteString(plainHeader)
	for i, l := range lines[start+1:] {
		switch {
		case strings.TrimSpace(l) == "":
			b.WriteString(strings.TrimLeft(l, " "))
		case strings.HasPrefix(l, "  "):
			b.WriteString(l[2:])
		default:
			return nil, fmt.Errorf("line %d: %q: spec must be the last top-level key", start+2+i, strings.TrimSpace(l))
		}
	}
	return b.Bytes(), nil
}

// TestPrometheusRuleFilesInStep: deploy/prometheus-rules.yaml is the
// PrometheusRule's spec, byte for byte (up to indentation and its header), and
// decodes to the same groups.
func TestPrometheusRuleFilesInStep(t *testing.T) {
	crd, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := plainRules(crd)
	if err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if *update {
		if err := os.WriteFile("prometheus-rules.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		at := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("prometheus-rules.yaml differs from prometheusrule.yaml's spec from its line %d:\n have %q\n want %q\n"+
			"edit prometheusrule.yaml, then: go test ./e2e/apiserver -run TestPrometheusRuleFilesInStep -update", i+1, at(gl), at(wl))
	}

	// Belt and braces: both decode to the same rules.
	var plain ruleFile
	if err := yaml.UnmarshalStrict(got, &plain); err != nil {
		t.Fatalf("prometheus-rules.yaml: %v", err)
	}
	spec := theRule(t).Spec
	if len(spec.Groups) == 0 || len(spec.Groups[0].Rules) == 0 {
		t.Fatal("prometheusrule.yaml has no rules")
	}
	if !reflect.DeepEqual(plain, spec) {
		t.Errorf("the two files decode to different rules:\nplain: %+v\nCRD:   %+v", plain, spec)
	}
}

func TestPlainRulesRejectsSpecNotLast(t *testing.T) {
	if _, err := plainRules([]byte("kind: X\nspec:\n  groups: []\nstatus: {}\n")); err == nil {
		t.Error("a key after spec was taken into the rule file")
	}
	got, err := plainRules([]byte("kind: X\nspec:\n  groups:\n    - name: a\n\n  # c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := plainHeader + "groups:\n  - name: a\n\n# c\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// promtool returns the path of promtool (Debian: apt-get install prometheus), or
// skips (fails under EADDR_REQUIRE_BPF=1) without it.
func promtool(t *testing.T) string {
	t.Helper()
	p := testenv.Program(t, "promtool", "prometheus")
	return p
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// The unit tests of the alerts: series that must fire each alert and series
// that must not.
const alertTests = "testdata/alerts_test.yaml"

// TestPrometheusRules runs promtool on the plain rule file (which
// TestPrometheusRuleFilesInStep keeps equal to the PrometheusRule): its syntax
// and PromQL, then the unit tests.
func TestPrometheusRules(t *testing.T) {
	runPromtool(t, "check", "rules", "prometheus-rules.yaml")
	runPromtool(t, "test", "rules", alertTests)
}

// promtoolTests is the part of promtool's unit test file this test reads.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertIsTested: each alert has at least one case where it must fire
// and one where it must not, so an alert added without tests fails here.
func TestEveryAlertIsTested(t *testing.T) {
	data, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	var tests promtoolTests
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"../prometheus-rules.yaml"}) {
		t.Errorf("%s tests rule_files %v, want [../prometheus-rules.yaml]", alertTests, tests.RuleFiles)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, g := range theRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no case in %s where %s must fire", alertTests, alertTests, r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no case in %s where %s must not fire", alertTests, alertTests, r.Alert)
			}
			delete(fires, r.Alert)
			delete(silent, r.Alert)
		}
	}
	for a := range fires {
		t.Errorf("%s tests %s, which is no alert of prometheusrule.yaml", alertTests, a)
	}
	for a := range silent {
		t.Errorf("%s tests %s, which is no alert of prometheusrule.yaml", alertTests, a)
	}
}

// TestAlertsAreDocumented: each alert has a severity, a summary, a description
// and a runbook_url that points at its own heading in docs/alerts.md.
func TestAlertsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/eaddr/eaddr/blob/main/docs/alerts.md#"
	n := 0
	for _, g := range theRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if u, want := r.Annotations["runbook_url"], base+strings.ToLower(r.Alert); u != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, u, want)
			}
			if !regexp.MustCompile(`(?m)^### ` + r.Alert + `\n`).Match(doc) {
				t.Errorf("docs/alerts.md has no heading \"### %s\" for the runbook_url", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts")
	}
}

// exportedMetrics greps the metric names eaddr registers (Name: "eaddr_..."
// in the options of a metric, or NewDesc("eaddr_..." for a collector's own)
// from pipeline/*.go, so that a renamed metric fails the tests below.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "pipeline", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?:\bName:\s*|\bNewDesc\(\s*)"(eaddr_[a-z0-9_]+)"`).FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
	}
	// Sanity: the grep finds what it is for.
	for _, n := range []string{"eaddr_errors_total", "eaddr_ephemeral_ports_in_use", "eaddr_up", "eaddr_snat_entries"} {
		if !names[n] {
			t.Fatalf("pipeline/*.go: %s not found by the grep (found %v)", n, names)
		}
	}
	return names
}

// Metrics an expression may use that eaddr does not export: the scrape's own.
var scrapeMetrics = map[string]bool{"up": true}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\([^)]*\)|\bgroup_(?:left|right)\b(?:\s*\([^)]*\))?`)
	grafanaVars   = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	labelValues   = regexp.MustCompile(`\blabel_values\s*\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?[^,)]*,\s*\w+\s*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
	promNumberish = regexp.MustCompile(`\b\d[\w.]*`) // 0.8, 15m, 1e3: not names
)

// metricNames returns the metric names expr selects: identifiers outside
// strings, label matchers, ranges and grouping clauses that are no function
// call, keyword or Grafana variable. Grafana's label_values(metric, label) counts
// as its metric.
func metricNames(expr string) []string {
	e := labelValues.ReplaceAllString(expr, " $1 ")
	e = grafanaVars.ReplaceAllString(e, " ")
	e = promStrings.ReplaceAllString(e, " ")
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promNumberish.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || promKeywords[strings.ToLower(m[0])] {
			continue // a function or aggregation, or a keyword
		}
		names = append(names, m[0])
	}
	return names
}

// checkNames returns an error for each name in expr that eaddr does not export.
func checkNames(expr string, exported map[string]bool) []error {
	var errs []error
	names := metricNames(expr)
	if len(names) == 0 {
		errs = append(errs, fmt.Errorf("no metric name found in %q", expr))
	}
	for _, n := range names {
		if !exported[n] && !scrapeMetrics[n] {
			errs = append(errs, fmt.Errorf("%s is not a metric eaddr exports (pipeline/metrics.go), in %q", n, expr))
		}
	}
	return errs
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum without (syscall) (rate(eaddr_errors_total{pod=~"$pod", namespace="a b"}[$__rate_interval])) > 1`, []string{"eaddr_errors_total"}},
		{`a / b > 0.8 and on(job, instance) (increase(c[15m]) > 0)`, []string{"a", "b", "c"}},
		{`predict_linear(x[15m], 15 * 60) >= y`, []string{"x", "y"}},
		{`x / ignoring(d) group_left y >= 0.8 or ignoring(d) z * on(a) group_right(b) w`, []string{"x", "y", "z", "w"}},
		{"eaddr_up == 0 or up{namespace=\"eaddr\"} == 0 or absent(up{pod=~\"eaddr-.+\"})", []string{"eaddr_up", "up", "up"}},
		{`label_values(eaddr_errors_total{namespace=~"$namespace"}, pod)`, []string{"eaddr_errors_total"}},
		{`sum by (instance) (rate(eaddr_lost_events_total[5m])) * 1e3`, []string{"eaddr_lost_events_total"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	exported := exportedMetrics(t)
	if errs := checkNames(`rate(eaddr_error_total[5m])`, exported); len(errs) != 1 {
		t.Errorf("a misspelt metric: %v, want one error", errs)
	}
	if errs := checkNames(`rate(eaddr_errors_total[5m])`, exported); len(errs) != 0 {
		t.Errorf("a real metric: %v", errs)
	}
}

// TestRulesUseExportedMetrics: every rule's expression selects only metrics
// eaddr exports (or up).
func TestRulesUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	for _, g := range theRule(t).Spec.Groups {
		for _, r := range g.Rules {
			for _, err := range checkNames(r.Expr, exported) {
				t.Errorf("%s: %v", r.Alert+r.Record, err)
			}
		}
	}
}

// dashboard is the part of a Grafana dashboard's JSON this test reads.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	UID           string
	Templating    struct {
		List []struct {
			Type, Name string
			Query      any
			Datasource *grafanaDS
			Definition string
		}
	}
	Panels []panel
}

type grafanaDS struct{ Type, UID string }

type panel struct {
	ID         int
	Type       string
	Title      string
	Datasource *grafanaDS
	GridPos    struct{ X, Y, W, H int }
	Targets    []struct {
		Expr       string
		RefID      string `json:"refId"`
		Datasource *grafanaDS
	}
	Panels []panel // a collapsed row's
}

// TestGrafanaDashboard: deploy/grafana-dashboard.json parses; the datasource
// is the ${datasource} variable of type prometheus; namespace and pod are
// variables; every panel queries it, and every expression selects only metrics
// eaddr exports (grepped from pipeline/metrics.go) or up.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if dec.More() {
		t.Fatal("grafana-dashboard.json: data after the dashboard")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (datasources as {type, uid})", d.SchemaVersion)
	}
	if d.UID == "" {
		t.Error("no uid: each import would make a new dashboard")
	}
	exported := exportedMetrics(t)
	promDS := func(where string, ds *grafanaDS) {
		if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
			t.Errorf("%s: datasource %+v, want {prometheus ${datasource}}", where, ds)
		}
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch {
		case v.Name == "datasource":
			if v.Type != "datasource" || v.Query != "prometheus" {
				t.Errorf("variable datasource: type %q query %v, want a datasource variable of type prometheus", v.Type, v.Query)
			}
		case v.Type == "query":
			promDS("variable "+v.Name, v.Datasource)
			for _, err := range checkNames(v.Definition, exported) {
				t.Errorf("variable %s: %v", v.Name, err)
			}
		}
	}
	for _, n := range []string{"datasource", "namespace", "pod"} {
		if !vars[n] {
			t.Errorf("no variable %s", n)
		}
	}

	ids := map[int]string{}
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if other, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: id used twice (also %s) or 0", where, other)
			}
			ids[p.ID] = where
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: gridPos %+v outside the 24 columns", where, p.GridPos)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			promDS(where, p.Datasource)
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", where)
			}
			for _, q := range p.Targets {
				queries++
				promDS(where+" query "+q.RefID, q.Datasource)
				for _, err := range checkNames(q.Expr, exported) {
					t.Errorf("%s: %v", where, err)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatal("no queries in the dashboard")
	}
	t.Logf("%d panels, %d queries", len(ids), queries)
}

// TestDocumentedPodMonitor: the PodMonitor docs/alerts.md shows honors eaddr's
// labels (the rules and the dashboard rely on it) and selects the DaemonSet's
// pods and port.
func TestDocumentedPodMonitor(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block []byte
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
		if bytes.Contains(m[1], []byte("kind: PodMonitor")) {
			block = m[1]
		}
	}
	if block == nil {
		t.Fatal("docs/alerts.md shows no PodMonitor")
	}
	var pm struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct{ Namespace string }
		Spec       struct {
			NamespaceSelector   struct{ MatchNames []string }
			Selector            struct{ MatchLabels map[string]string }
			PodMetricsEndpoints []struct {
				Port        string
				HonorLabels bool
			}
		}
	}
	if err := yaml.Unmarshal(block, &pm); err != nil {
		t.Fatalf("docs/alerts.md's PodMonitor: %v", err)
	}
	ds := eaddrDaemonSet(t)
	if pm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("apiVersion %q", pm.APIVersion)
	}
	if !slices.Contains(pm.Spec.NamespaceSelector.MatchNames, ds.Namespace) && pm.Metadata.Namespace != ds.Namespace {
		t.Errorf("the PodMonitor does not look in the DaemonSet's namespace %s", ds.Namespace)
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 {
		t.Error("the PodMonitor selects no labels")
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the PodMonitor selects %s=%s, which the DaemonSet's pods do not carry", k, v)
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d podMetricsEndpoints, want 1", len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port != "metrics" || ctr(ds).Ports[0].Name != "metrics" {
		t.Errorf("the PodMonitor scrapes port %q, the DaemonSet names %q", ep.Port, ctr(ds).Ports[0].Name)
	}
	if !ep.HonorLabels {
		t.Error("the PodMonitor lacks honorLabels: true: eaddr's namespace and pod would become exported_namespace and exported_pod")
	}
}
