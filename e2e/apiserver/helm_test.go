package apiserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/deploytest"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/eaddr/eaddr/internal/testing/helmtest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// chartDir and release are the chart and release name the tiers of deploy/ share.
const chartDir, release = deploytest.ChartDir, deploytest.Release

// chartVariants pair the values of a rendering with the kustomization whose
// objects it must equal.
var chartVariants = []struct {
	name string
	set  []string // helm --set arguments
	dir  string   // the kustomization under deploy/
	also string   // one applied beside it ("": none)
}{
	{"default", nil, "base", ""},
	{"kubeEvents", []string{"kubeEvents.enabled=true"}, "kube-events", ""},
	{"nodePortCollisions", []string{"kubeEvents.enabled=true", "nodePortCollisions.enabled=true"}, "nodeport-collisions", ""},
	{"networkPolicy", []string{"metrics.networkPolicy.enabled=true"}, "base", "metrics-policy"},
}

// setArgs turns kv pairs into helm's --set arguments.
func setArgs(kv []string) []string {
	var args []string
	for _, s := range kv {
		args = append(args, "--set", s)
	}
	return args
}

// helmTemplate runs `helm template eaddr deploy/helm/eaddr` with the --set
// values kv and returns what it printed; anything on stderr fails the test.
func helmTemplate(t *testing.T, h *helmtest.Helm, kv ...string) []byte {
	t.Helper()
	args := append([]string{"template", release, chartDir}, setArgs(kv)...)
	out, stderr, err := h.Run(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(stderr)) > 0 {
		t.Errorf("helm %s wrote on stderr: %s", strings.Join(args, " "), stderr)
	}
	return out
}

// decodeRendered decodes a YAML stream of the kinds a kustomization may
// build (kustomizedKinds) strictly, document by document: what helm
// template renders or kubectl kustomize builds; what names the stream in
// messages.
func decodeRendered(t *testing.T, what string, data []byte) []object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		where := fmt.Sprintf("%s: document %d", what, i)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue // comments only
		}
		gvk, err := kjson.DefaultMetaFactory.Interpret(j)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		newObj, ok := kustomizedKinds[*gvk]
		if !ok {
			t.Fatalf("%s: kind %s %s is not expected", where, gvk.GroupVersion(), gvk.Kind)
		}
		obj, _, err := kustomizedDecoder.Decode(doc, nil, newObj())
		if err != nil {
			t.Fatalf("%s (%s): %v", where, gvk.Kind, err)
		}
		out = append(out, object{where: where, gvk: *gvk, obj: obj, raw: doc})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no objects", what)
	}
	return out
}

// chartMeta is the part of Chart.yaml the tests read.
type chartMeta struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func readChartMeta(t *testing.T) chartMeta {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m chartMeta
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s/Chart.yaml: %v", chartDir, err)
	}
	if m.Name == "" || m.Version == "" || m.AppVersion == "" {
		t.Fatalf("%s/Chart.yaml: name %q, version %q, appVersion %q: want all three", chartDir, m.Name, m.Version, m.AppVersion)
	}
	return m
}

// TestHelmLint: `helm lint --strict` (a warning is a failure) passes for the
// default values and for each variant.
func TestHelmLint(t *testing.T) {
	h := helmtest.New(t)
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir}, setArgs(v.set)...)
			out, stderr, err := h.Run(nil, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) || len(bytes.TrimSpace(stderr)) > 0 {
				t.Errorf("helm %s:\n%s\nstderr: %s", strings.Join(args, " "), out, stderr)
			}
			t.Logf("helm %s:\n%s", strings.Join(args, " "), out)
		})
	}
}

// TestHelmValuesSchema: values.schema.json refuses a key the chart does not
// have, so a misspelt --set fails instead of rendering the defaults, and a
// value of the wrong type.
func TestHelmValuesSchema(t *testing.T) {
	h := helmtest.New(t)
	for _, set := range []string{"kubeEvent.enabled=true", "metrics.enable=false", "metrics.port=http", "image.pullPolicy=Sometimes",
		"metrics.destinationLabel=no", "metrics.networkPolicy.enable=true", "metrics.networkPolicy.from[0]=null"} {
		_, _, err := h.Run(nil, "template", release, chartDir, "--set", set)
		if err == nil {
			t.Errorf("helm template --set %s rendered; want values.schema.json to refuse it", set)
			continue
		}
		if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("helm template --set %s: %v; want a schema error", set, err)
		}
	}
}

// TestHelmTemplate: `helm template` renders each variant, with nothing on
// stderr, into objects that decode strictly (a misspelt field fails).
func TestHelmTemplate(t *testing.T) {
	h := helmtest.New(t)
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			objs := decodeRendered(t, "helm template "+v.name, helmTemplate(t, h, v.set...))
			for _, o := range objs {
				t.Logf("%s: %s %s", o.where, o.gvk.Kind, o.obj.(interface{ GetName() string }).GetName())
			}
		})
	}
}

// TestHelmServerDryRun gives what `helm template` renders of each variant to
// a real kube-apiserver (internal/testing/kubetest) with the real `kubectl apply
// --dry-run=server --validate=strict`, as TestKustomizeServerDryRun does with
// kubectl kustomize's output: every object accepted, no warning, with Pod
// Security enforcing baseline where a namespace says nothing.
func TestHelmServerDryRun(t *testing.T) {
	h := helmtest.New(t)
	s := kubetest.StartWith(t, kubetest.Options{PodSecurityDefaultEnforce: "baseline"})
	k := s.Kubectl(t)
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			out := helmTemplate(t, h, v.set...)
			what := "helm template " + v.name
			serverDryRun(t, k, what, out, decodeRendered(t, what, out))
		})
	}
}

// serverDryRun applies the Namespaces among objs (rendered as out) for real,
// then all of out with `kubectl apply --dry-run=server --validate=strict`:
// each object must be accepted, with nothing on stderr.
func serverDryRun(t *testing.T, k *kubetest.Kubectl, what string, out []byte, objs []object) {
	t.Helper()
	var namespaces [][]byte
	for _, o := range objs {
		if _, ok := o.obj.(*corev1.Namespace); ok {
			namespaces = append(namespaces, o.raw)
		}
	}
	if len(namespaces) > 0 {
		if _, stderr, err := k.Run(bytes.Join(namespaces, []byte("\n---\n")), "apply", "--validate=strict", "-f", "-"); err != nil || len(stderr) > 0 {
			t.Fatalf("applying the Namespaces of %s: %v %s", what, err, stderr)
		}
	}
	stdout, stderr, err := k.Run(out, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server of %s: %v", what, err)
	}
	if len(bytes.TrimSpace(stderr)) > 0 {
		t.Errorf("kubectl apply --dry-run=server of %s: stderr: %s", what, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if len(lines) != len(objs) {
		t.Errorf("kubectl apply --dry-run=server of %s: %d lines for %d objects:\n%s", what, len(lines), len(objs), stdout)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " (server dry run)") {
			t.Errorf("kubectl apply --dry-run=server of %s: %q", what, l)
		}
	}
	t.Logf("kubectl apply --dry-run=server of %s:\n%s", what, stdout)
}

// objectKey names an object: kind, namespace and name.
func objectKey(o object) string {
	m := o.obj.(interface {
		GetNamespace() string
		GetName() string
	})
	if m.GetNamespace() == "" {
		return o.gvk.Kind + " " + m.GetName()
	}
	return o.gvk.Kind + " " + m.GetNamespace() + "/" + m.GetName()
}

// unstructured is obj as JSON-like maps, after its typed decoding: the
// fields as the API server would store them (quantities canonical, unset
// fields absent).
func unstructured(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// diffValues lists where have and want differ, one line per field, path
// first.
func diffValues(path string, have, want any) []string {
	hm, hok := have.(map[string]any)
	wm, wok := want.(map[string]any)
	if hok && wok {
		keys := make([]string, 0, len(hm)+len(wm))
		for k := range hm {
			keys = append(keys, k)
		}
		for k := range wm {
			if _, ok := hm[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			hv, hin := hm[k]
			wv, win := wm[k]
			switch {
			case !win:
				out = append(out, fmt.Sprintf("%s.%s: only the chart has it: %s", path, k, jsonOf(hv)))
			case !hin:
				out = append(out, fmt.Sprintf("%s.%s: the chart lacks it: %s", path, k, jsonOf(wv)))
			default:
				out = append(out, diffValues(path+"."+k, hv, wv)...)
			}
		}
		return out
	}
	hs, hok := have.([]any)
	ws, wok := want.([]any)
	if hok && wok {
		var out []string
		for i := 0; i < max(len(hs), len(ws)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(ws):
				out = append(out, fmt.Sprintf("%s: only the chart has it: %s", p, jsonOf(hs[i])))
			case i >= len(hs):
				out = append(out, fmt.Sprintf("%s: the chart lacks it: %s", p, jsonOf(ws[i])))
			default:
				out = append(out, diffValues(p, hs[i], ws[i])...)
			}
		}
		return out
	}
	if h, w := jsonOf(have), jsonOf(want); h != w {
		return []string{fmt.Sprintf("%s: the chart has %s, the manifests %s", path, h, w)}
	}
	return nil
}

func jsonOf(v any) string {
	j, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	j, err = yaml.YAMLToJSON(j)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(j)
}

// helmLabels are the one intended difference between the chart's objects and
// the manifests': Helm's standard labels
// (https://helm.sh/docs/chart_best_practices/labels/), on every object and on
// the DaemonSet's pod template, with these values for release eaddr. Where a
// manifest has one of them already (the RBAC's app.kubernetes.io/name), the
// values must agree. Anything else that differs fails TestChartAgreesWithManifests.
func helmLabels(m chartMeta) map[string]string {
	return map[string]string{
		"helm.sh/chart":                m.Name + "-" + m.Version,
		"app.kubernetes.io/name":       m.Name,
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    m.AppVersion,
		"app.kubernetes.io/managed-by": "Helm",
	}
}

// labelPaths are where objects carry labels: their own and, for the
// DaemonSet, its pod template's.
var labelPaths = [][]string{{"metadata", "labels"}, {"spec", "template", "metadata", "labels"}}

// removeHelmLabels takes the intended difference out of chart (an object of
// the chart, as unstructured), given manifest (the same object of the
// manifests): each of want's labels must be on chart with its value; it is
// removed unless manifest has the label too. It returns what is wrong.
func removeHelmLabels(chart, manifest map[string]any, want map[string]string) []string {
	var errs []string
	for _, path := range labelPaths {
		cl, found := nestedMap(chart, path)
		ml, _ := nestedMap(manifest, path)
		if !found {
			if len(path) == 2 {
				errs = append(errs, fmt.Sprintf("%s: none: want Helm's labels %v", strings.Join(path, "."), want))
			}
			continue
		}
		for k, v := range want {
			if have, ok := cl[k]; !ok {
				errs = append(errs, fmt.Sprintf("%s[%q] missing, want %q", strings.Join(path, "."), k, v))
			} else if have != v {
				errs = append(errs, fmt.Sprintf("%s[%q]: %q, want %q", strings.Join(path, "."), k, have, v))
			}
			if _, ok := ml[k]; !ok {
				delete(cl, k)
			}
		}
	}
	return errs
}

// nestedMap returns the map at path in obj.
func nestedMap(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// TestChartAgreesWithManifests: the chart rendered with default values is
// the objects of `kubectl kustomize deploy/base`, and with
// kubeEvents.enabled=true those of `kubectl kustomize deploy/kube-events`
// (and so on, chartVariants): the same objects, compared as parsed objects field by field, with Helm's
// standard labels (helmLabels) the only difference allowed.
func TestChartAgreesWithManifests(t *testing.T) {
	h := helmtest.New(t)
	k := kubetest.NewKubectl(t)
	want := helmLabels(readChartMeta(t))
	for _, v := range chartVariants {
		t.Run(v.name, func(t *testing.T) {
			chart := decodeRendered(t, "helm template "+v.name, helmTemplate(t, h, v.set...))
			manifests := decodeRendered(t, "kubectl kustomize "+v.dir, kustomize(t, k, v.dir))
			dirs := v.dir
			if v.also != "" {
				manifests = append(manifests, decodeRendered(t, "kubectl kustomize "+v.also, kustomize(t, k, v.also))...)
				dirs += " and " + v.also
			}
			byKey := map[string]object{}
			for _, o := range manifests {
				byKey[objectKey(o)] = o
			}
			for _, c := range chart {
				key := objectKey(c)
				m, ok := byKey[key]
				if !ok {
					t.Errorf("%s: rendered by the chart, not in kubectl kustomize %s", key, dirs)
					continue
				}
				delete(byKey, key)
				cu, mu := unstructured(t, c.obj), unstructured(t, m.obj)
				for _, e := range removeHelmLabels(cu, mu, want) {
					t.Errorf("%s: the chart's labels: %s", key, e)
				}
				for _, d := range diffValues("", cu, mu) {
					t.Errorf("%s: %s (kubectl kustomize %s)", key, d, dirs)
				}
			}
			for key := range byKey {
				t.Errorf("%s: in kubectl kustomize %s, not rendered by the chart", key, dirs)
			}
			if !t.Failed() {
				t.Logf("the %d objects of the chart (%s) agree with kubectl kustomize %s", len(chart), v.name, dirs)
			}
		})
	}
}

// TestChartValues: each value of values.yaml reaches every place it must
// (the agreement test only sees chartVariants' values).
func TestChartValues(t *testing.T) {
	h := helmtest.New(t)
	for _, tc := range []struct {
		set   []string
		check func(objs []object, ds *appsv1.DaemonSet) []string
	}{
		{[]string{"metrics.port=9700"}, checkMetricsPort},
		{[]string{"metrics.enabled=false"}, checkNoMetrics},
		{[]string{"metrics.destinationLabel=false"}, checkNoDestination},
		{[]string{"criSocket=/run/k3s/containerd/containerd.sock"}, checkCRISocket},
		{[]string{"resources.limits.memory=512Mi", "goMemLimit=400MiB"}, checkMemory},
		{[]string{"kubeEvents.enabled=true", "extraArgs={--rate-limit,1000/s}"}, checkExtraArgs},
		{[]string{"image.repository=registry.example/eaddr", "image.tag=v1.2.3"}, checkImage},
		{[]string{"namespace.name=monitoring", "namespace.create=false", "kubeEvents.enabled=true"}, checkNamespace("monitoring")},
		{[]string{"namespace.name=", "namespace.create=false"}, checkNamespace("default")}, // the release's
	} {
		t.Run(strings.Join(tc.set, ","), func(t *testing.T) {
			objs := decodeRendered(t, "helm template --set "+strings.Join(tc.set, ","), helmTemplate(t, h, tc.set...))
			for _, p := range tc.check(objs, the[*appsv1.DaemonSet](t, "helm template", objs)) {
				t.Error(p)
			}
		})
	}
}

func checkMetricsPort(_ []object, ds *appsv1.DaemonSet) []string {
	var p []string
	c := ctr(ds)
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9700 || c.Ports[0].Name != "metrics" {
		p = append(p, fmt.Sprintf("ports %+v, want metrics 9700", c.Ports))
	}
	if v := flagValue(c.Args, "--metrics-addr"); v != ":9700" {
		p = append(p, fmt.Sprintf("--metrics-addr %q, want :9700", v))
	}
	if v := ds.Spec.Template.Annotations["prometheus.io/port"]; v != "9700" {
		p = append(p, fmt.Sprintf("prometheus.io/port %q, want 9700", v))
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Port.String() != "metrics" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Port.String() != "metrics" {
		p = append(p, "the probes do not ask the metrics port")
	}
	return p
}

func checkNoMetrics(_ []object, ds *appsv1.DaemonSet) []string {
	var p []string
	c := ctr(ds)
	if len(c.Ports) != 0 || c.ReadinessProbe != nil || c.LivenessProbe != nil {
		p = append(p, fmt.Sprintf("ports %+v, readiness %v, liveness %v: want none (no /healthz without --metrics-addr)", c.Ports, c.ReadinessProbe, c.LivenessProbe))
	}
	if slices.Contains(c.Args, "--metrics-addr") {
		p = append(p, fmt.Sprintf("args %q: want no --metrics-addr", c.Args))
	}
	for k := range ds.Spec.Template.Annotations {
		if strings.HasPrefix(k, "prometheus.io/") {
			p = append(p, "annotation "+k+": want no prometheus.io/ annotation without metrics")
		}
	}
	return p
}

// checkNoDestination: metrics.destinationLabel=false is
// --metrics-no-destination, after --metrics-addr; the default has none
// (TestChartAgreesWithManifests).
func checkNoDestination(_ []object, ds *appsv1.DaemonSet) []string {
	args := ctr(ds).Args
	i := slices.Index(args, "--metrics-no-destination")
	if i < 0 || slices.Index(args, "--metrics-addr") > i || slices.Index(args, "--metrics-addr") < 0 {
		return []string{fmt.Sprintf("args %q: want --metrics-addr and then --metrics-no-destination", args)}
	}
	return nil
}

func checkCRISocket(_ []object, ds *appsv1.DaemonSet) []string {
	const want = "/run/k3s/containerd/containerd.sock"
	var vol string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "cri-socket" && v.HostPath != nil {
			vol = v.HostPath.Path
		}
	}
	m, arg := mount(ds, "cri-socket").MountPath, flagValue(ctr(ds).Args, "--cri-endpoint")
	if vol != want || m != want || arg != want {
		return []string{fmt.Sprintf("hostPath %q, mountPath %q, --cri-endpoint %q: want %s, all three", vol, m, arg, want)}
	}
	return nil
}

func checkMemory(_ []object, ds *appsv1.DaemonSet) []string {
	c := ctr(ds)
	l, r := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Requests[corev1.ResourceMemory]
	if l.String() != "512Mi" || r.String() != "64Mi" || env(ds, "GOMEMLIMIT").Value != "400MiB" {
		return []string{fmt.Sprintf("memory limit %s, request %s, GOMEMLIMIT %q: want 512Mi, 64Mi (the default), 400MiB", &l, &r, env(ds, "GOMEMLIMIT").Value)}
	}
	return nil
}

func checkExtraArgs(_ []object, ds *appsv1.DaemonSet) []string {
	args := ctr(ds).Args
	if n := len(args); n < 3 || !slices.Equal(args[n-3:], []string{"--kube-events", "--rate-limit", "1000/s"}) {
		return []string{fmt.Sprintf("args %q: want --kube-events, then the extra args last", args)}
	}
	return nil
}

func checkImage(_ []object, ds *appsv1.DaemonSet) []string {
	if img, v := ctr(ds).Image, ds.Labels["app.kubernetes.io/version"]; img != "registry.example/eaddr:v1.2.3" || v != "v1.2.3" {
		return []string{fmt.Sprintf("image %q, app.kubernetes.io/version %q: want registry.example/eaddr:v1.2.3 and v1.2.3", img, v)}
	}
	return nil
}

// checkNamespace: with namespace.create=false no Namespace is rendered, and
// the namespaced objects and the binding's subject are in ns.
func checkNamespace(ns string) func([]object, *appsv1.DaemonSet) []string {
	return func(objs []object, _ *appsv1.DaemonSet) []string {
		var p []string
		for _, o := range objs {
			switch obj := o.obj.(type) {
			case *corev1.Namespace:
				p = append(p, "a Namespace is rendered with namespace.create=false")
			case *rbacv1.ClusterRoleBinding:
				if obj.Subjects[0].Namespace != ns {
					p = append(p, fmt.Sprintf("binding's subject in %q, want %q", obj.Subjects[0].Namespace, ns))
				}
			case *corev1.ServiceAccount, *appsv1.DaemonSet:
				if n := obj.(interface{ GetNamespace() string }).GetNamespace(); n != ns {
					p = append(p, fmt.Sprintf("%s in %q, want %q", objectKey(o), n, ns))
				}
			}
		}
		return p
	}
}

// TestHelmInstallAPIServer installs the chart with the real helm into a real
// kube-apiserver (internal/testing/kubetest: no kubelet, so no pod runs; Pod Security
// baseline where a namespace says nothing), as the docs say: `helm install
// eaddr deploy/helm/eaddr --set kubeEvents.enabled=true` (and the
// NetworkPolicy), the release in the default namespace and the chart's own
// Namespace eaddr made by it. Then `helm upgrade` with kubeEvents off (and
// the NetworkPolicy's default, off) takes the RBAC and the NetworkPolicy
// away and the token out of the pod, and `helm uninstall` deletes what the
// chart made.
func TestHelmInstallAPIServer(t *testing.T) {
	s := kubetest.StartWith(t, kubetest.Options{PodSecurityDefaultEnforce: "baseline"})
	k := s.Kubectl(t)
	h := helmtest.New(t)
	h.Kubeconfig = k.Kubeconfig
	helm := func(args ...string) string {
		t.Helper()
		out, stderr, err := h.Run(nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stderr)) > 0 {
			t.Errorf("helm %s wrote on stderr: %s", strings.Join(args, " "), stderr)
		}
		t.Logf("helm %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	helm("install", release, chartDir, "--set", "kubeEvents.enabled=true", "--set", "metrics.networkPolicy.enabled=true")
	for _, o := range []string{"namespace/eaddr", "clusterrole/eaddr-kube-events", "clusterrolebinding/eaddr-kube-events",
		"-n eaddr serviceaccount/eaddr", "-n eaddr daemonset/eaddr", "-n eaddr networkpolicy/eaddr-metrics"} {
		if !exists(t, k, o) {
			t.Errorf("%s: not made by helm install", o)
		}
	}
	ds := getDaemonSet(t, k)
	if a := ds.Annotations["meta.helm.sh/release-name"]; a != release || !on(ds.Spec.Template.Spec.AutomountServiceAccountToken) ||
		!slices.Contains(ctr(ds).Args, "--kube-events") {
		t.Errorf("the DaemonSet stored: release %q, automount %v, args %q; want %s, true, --kube-events", a,
			ds.Spec.Template.Spec.AutomountServiceAccountToken, ctr(ds).Args, release)
	}
	if out := helm("list", "--namespace", "default", "--short"); strings.TrimSpace(out) != release {
		t.Errorf("helm list in the default namespace: %q, want %s", out, release)
	}

	helm("upgrade", release, chartDir, "--set", "kubeEvents.enabled=false")
	for _, o := range []string{"clusterrole/eaddr-kube-events", "clusterrolebinding/eaddr-kube-events", "-n eaddr networkpolicy/eaddr-metrics"} {
		if exists(t, k, o) {
			t.Errorf("%s: still there after helm upgrade with kubeEvents.enabled=false", o)
		}
	}
	if ds := getDaemonSet(t, k); on(ds.Spec.Template.Spec.AutomountServiceAccountToken) || slices.Contains(ctr(ds).Args, "--kube-events") {
		t.Errorf("after the upgrade: automount %v, args %q; want no token, no --kube-events", ds.Spec.Template.Spec.AutomountServiceAccountToken, ctr(ds).Args)
	}

	helm("uninstall", release)
	for _, o := range []string{"-n eaddr serviceaccount/eaddr", "-n eaddr daemonset/eaddr"} {
		if exists(t, k, o) {
			t.Errorf("%s: still there after helm uninstall", o)
		}
	}
}

// exists says whether `kubectl get` finds the object (args: [-n NS] KIND/NAME).
func exists(t *testing.T, k *kubetest.Kubectl, what string) bool {
	t.Helper()
	_, _, err := k.Run(nil, append([]string{"get", "-o", "name"}, strings.Fields(what)...)...)
	if err != nil && !strings.Contains(err.Error(), "NotFound") {
		t.Fatal(err)
	}
	return err == nil
}

// getDaemonSet returns the DaemonSet eaddr/eaddr as the API server stores it.
func getDaemonSet(t *testing.T, k *kubetest.Kubectl) *appsv1.DaemonSet {
	t.Helper()
	out, _, err := k.Run(nil, "get", "-n", "eaddr", "daemonset/eaddr", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(out, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

// TestChartReleaseName: under another release name every name and every
// reference to one follows it (release eaddr, which the other tests use,
// would hide a name written out in a template).
func TestChartReleaseName(t *testing.T) {
	h := helmtest.New(t)
	out, stderr, err := h.Run(nil, "template", "obs", chartDir, "--set", "kubeEvents.enabled=true")
	if err != nil || len(bytes.TrimSpace(stderr)) > 0 {
		t.Fatalf("%v %s", err, stderr)
	}
	objs := decodeRendered(t, "helm template obs", out)
	const name = "obs-eaddr"
	ds := the[*appsv1.DaemonSet](t, "helm template obs", objs)
	sa := the[*corev1.ServiceAccount](t, "helm template obs", objs)
	role := the[*rbacv1.ClusterRole](t, "helm template obs", objs)
	binding := the[*rbacv1.ClusterRoleBinding](t, "helm template obs", objs)
	got := map[string]string{
		"DaemonSet":                    ds.Name,
		"its selector's app":           ds.Spec.Selector.MatchLabels["app"],
		"its pods' app":                ds.Spec.Template.Labels["app"],
		"its serviceAccountName":       ds.Spec.Template.Spec.ServiceAccountName,
		"ServiceAccount":               sa.Name,
		"ClusterRole":                  strings.TrimSuffix(role.Name, "-kube-events"),
		"ClusterRoleBinding":           strings.TrimSuffix(binding.Name, "-kube-events"),
		"the binding's roleRef":        strings.TrimSuffix(binding.RoleRef.Name, "-kube-events"),
		"the binding's ServiceAccount": binding.Subjects[0].Name,
	}
	for what, n := range got {
		if n != name {
			t.Errorf("%s: %q, want %q", what, n, name)
		}
	}
	if i := ds.Spec.Template.Labels["app.kubernetes.io/instance"]; i != "obs" {
		t.Errorf("the pods' app.kubernetes.io/instance: %q, want obs", i)
	}
}
