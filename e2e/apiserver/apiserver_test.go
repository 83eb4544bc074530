package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// notServed are kinds in deploy/ that a bare API server does not know, and
// why TestAPIServer does not create them.
var notServed = map[string]string{
	"monitoring.coreos.com/v1 PrometheusRule": "a custom resource of the Prometheus Operator, whose CRD this API server " +
		"does not have; TestManifestsDecodeStrictly decodes it and TestPrometheusRules checks its rules with promtool",
}

// document is one YAML document of a manifest file, as shipped.
type document struct {
	where      string // file: document N
	yaml       []byte
	obj        map[string]any // the same, as JSON
	apiVersion string
	kind       string
	name       string
	namespace  string
}

// shippedDocuments reads every document of every manifest file
// (manifestFiles), Namespaces first.
func shippedDocuments(t *testing.T) []document {
	t.Helper()
	var docs []document
	for _, f := range manifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 1; ; i++ {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			where := fmt.Sprintf("%s: document %d", f, i)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
				continue // comments only
			}
			d := document{where: where, yaml: raw}
			if err := json.Unmarshal(j, &d.obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			d.apiVersion, _ = d.obj["apiVersion"].(string)
			d.kind, _ = d.obj["kind"].(string)
			meta, _ := d.obj["metadata"].(map[string]any)
			d.name, _ = meta["name"].(string)
			d.namespace, _ = meta["namespace"].(string)
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		t.Fatal("no Kubernetes objects in the manifest files")
	}
	slices.SortStableFunc(docs, func(a, b document) int {
		return boolToInt(b.kind == "Namespace") - boolToInt(a.kind == "Namespace")
	})
	return docs
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// create POSTs obj (JSON or YAML) to path with fieldValidation=Strict, plus
// dryRun=All if dryRun.
func create(t *testing.T, s *kubetest.Server, path string, body []byte, contentType string, dryRun bool) *kubetest.Response {
	t.Helper()
	q := "?fieldValidation=Strict"
	if dryRun {
		q += "&dryRun=All"
	}
	resp, err := s.Do(context.Background(), kubetest.Request{Method: "POST", Path: path + q, Body: body, ContentType: contentType})
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podFromTemplate is the Pod that the DaemonSet controller would make from
// the shipped pod template (its metadata and spec, unchanged), in namespace.
func podFromTemplate(t *testing.T, ds document, namespace string) []byte {
	t.Helper()
	spec, _ := ds.obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if tmpl == nil {
		t.Fatalf("%s: no spec.template", ds.where)
	}
	meta := map[string]any{}
	if m, ok := tmpl["metadata"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	meta["name"] = ds.name + "-podsecurity"
	meta["namespace"] = namespace
	return mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]})
}

// TestAPIServer gives the shipped manifests to a real kube-apiserver
// (internal/testing/kubetest): Debian's etcd and kube-apiserver kubetest.Version with
// the default admission plugins. Pod Security's default level, for namespaces
// without a label, is baseline, as on clusters whose administrators set it so:
// the shipped Namespace's label is then what admits eaddr's pod.
func TestAPIServer(t *testing.T) {
	s := kubetest.StartWith(t, kubetest.Options{PodSecurityDefaultEnforce: "baseline"})
	ctx := context.Background()
	docs := shippedDocuments(t)

	var daemonSet *document
	ok := t.Run("CreateStrictNoWarnings", func(t *testing.T) {
		for _, d := range docs {
			gv := d.apiVersion + " " + d.kind
			path, err := s.ResourcePath(ctx, d.apiVersion, d.kind, d.namespace)
			if errors.Is(err, kubetest.ErrUnknownKind) && notServed[gv] != "" {
				t.Logf("%s: %s %s not created: %s", d.where, gv, d.name, notServed[gv])
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", d.where, err)
				continue
			}
			// The document as shipped, as YAML: the server's strict field
			// validation sees unknown and duplicate fields exactly as written.
			resp := create(t, s, path, d.yaml, "application/yaml", false)
			if err := resp.Err(); err != nil {
				t.Errorf("%s: creating %s %s: %v", d.where, gv, d.name, err)
				continue
			}
			for _, w := range resp.Warnings {
				t.Errorf("%s: creating %s %s: warning: %s", d.where, gv, d.name, w)
			}
			t.Logf("%s: created %s %s (%s)", d.where, gv, d.name, path)
			if d.kind == "DaemonSet" {
				daemonSet = &d
			}
		}
	})
	if !ok {
		t.Fatal("the manifests could not all be created; the Pod Security checks need them")
	}
	if daemonSet == nil {
		t.Fatal("no DaemonSet among the manifests")
	}
	ds := *daemonSet

	// The DaemonSet's pod, in the DaemonSet's namespace as shipped: admitted,
	// without warnings.
	t.Run("PodSecurityAsShipped", func(t *testing.T) {
		resp := create(t, s, "/api/v1/namespaces/"+ds.namespace+"/pods", podFromTemplate(t, ds, ds.namespace), "", true)
		if err := resp.Err(); err != nil {
			t.Fatalf("the DaemonSet's pod is not admitted in namespace %s as shipped: %v", ds.namespace, err)
		}
		for _, w := range resp.Warnings {
			t.Errorf("the DaemonSet's pod in namespace %s: warning: %s", ds.namespace, w)
		}
	})

	// The same pod in a namespace that enforces baseline: rejected by Pod
	// Security, which is why the shipped Namespace says privileged.
	t.Run("PodSecurityBaselineRejects", func(t *testing.T) {
		const ns = "eaddr-baseline"
		for _, c := range []struct{ path, body string }{
			{"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `",
				"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}`},
			// So that the ServiceAccount admission plugin has nothing to object to.
			{"/api/v1/namespaces/" + ns + "/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"` +
				ds.obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["serviceAccountName"].(string) + `"}}`},
		} {
			if err := create(t, s, c.path, []byte(c.body), "", false).Err(); err != nil {
				t.Fatalf("POST %s: %v", c.path, err)
			}
		}
		resp := create(t, s, "/api/v1/namespaces/"+ns+"/pods", podFromTemplate(t, ds, ns), "", true)
		if resp.Status != http.StatusForbidden || !strings.Contains(resp.Err().Error(), `violates PodSecurity "baseline:latest"`) {
			t.Fatalf("the DaemonSet's pod in a namespace enforcing baseline: want 403 from PodSecurity, got %v", resp.Err())
		}
		t.Logf("rejected as expected: %v", resp.Err())
	})

	// deploy/kube-events as the real kubectl kustomize builds it: its RBAC
	// created, and its DaemonSet (token mounted, --kube-events) admitted,
	// strictly and without warnings (TestKustomizeServerDryRun gives the
	// whole output to kubectl apply --dry-run=server as well).
	t.Run("KubeEventsOverlay", func(t *testing.T) {
		for _, o := range kustomized(t, "kube-events") {
			switch o.gvk.Kind {
			case "ClusterRole", "ClusterRoleBinding":
				resp := create(t, s, "/apis/rbac.authorization.k8s.io/v1/"+strings.ToLower(o.gvk.Kind)+"s", o.raw, "application/yaml", false)
				if err := resp.Err(); err != nil || len(resp.Warnings) > 0 {
					t.Errorf("%s: %v %q", o.where, err, resp.Warnings)
				}
			case "DaemonSet":
				ds := o.obj.(*appsv1.DaemonSet)
				ds.Name += "-kube-events" // the shipped one was created above
				resp := create(t, s, "/apis/apps/v1/namespaces/"+ds.Namespace+"/daemonsets", mustJSON(t, ds), "", true)
				if err := resp.Err(); err != nil || len(resp.Warnings) > 0 {
					t.Errorf("the --kube-events DaemonSet: %v %q", err, resp.Warnings)
				}
			}
		}
	})

	// Controls: the checks above can see what they look for.
	t.Run("StrictRejectsUnknownField", func(t *testing.T) {
		var bad map[string]any
		if err := json.Unmarshal(mustJSON(t, ds.obj), &bad); err != nil {
			t.Fatal(err)
		}
		bad["metadata"].(map[string]any)["name"] = ds.name + "-strict" // not "already exists"
		bad["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["hostPid"] = true
		path, err := s.ResourcePath(ctx, ds.apiVersion, ds.kind, ds.namespace)
		if err != nil {
			t.Fatal(err)
		}
		resp := create(t, s, path, mustJSON(t, bad), "", true)
		if resp.Status < 400 || !strings.Contains(resp.Err().Error(), "hostPid") {
			t.Fatalf("a DaemonSet with spec.template.spec.hostPid: want rejected naming the field, got HTTP %d: %.300s", resp.Status, resp.Body)
		}
	})
	t.Run("WarningsAreSeen", func(t *testing.T) {
		const ns = "eaddr-warn"
		body := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `","labels":{
			"pod-security.kubernetes.io/enforce":"privileged","pod-security.kubernetes.io/warn":"baseline"}}}`
		if err := create(t, s, "/api/v1/namespaces", []byte(body), "", false).Err(); err != nil {
			t.Fatal(err)
		}
		path, err := s.ResourcePath(ctx, ds.apiVersion, ds.kind, ns)
		if err != nil {
			t.Fatal(err)
		}
		var moved map[string]any
		if err := json.Unmarshal(mustJSON(t, ds.obj), &moved); err != nil {
			t.Fatal(err)
		}
		moved["metadata"].(map[string]any)["namespace"] = ns
		resp := create(t, s, path, mustJSON(t, moved), "", true)
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.Contains(w, `would violate PodSecurity "baseline:latest"`) }) {
			t.Fatalf("the DaemonSet in a namespace that warns at baseline: want a PodSecurity warning, got %q", resp.Warnings)
		}
	})
}
