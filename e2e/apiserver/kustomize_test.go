package apiserver

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// kustomizationNames are the file names kustomize reads as a kustomization
// (sigs.k8s.io/kustomize/api/konfig.RecognizedKustomizationFileNames).
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizations are the directories under deploy/ that hold a kustomization,
// found by walking the tree, so that a new one cannot be left untested.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.Contains(kustomizationNames, d.Name()) {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no kustomization under deploy/")
	}
	return dirs
}

// kustomizedKinds are the kinds a kustomization may build: the manifests',
// the overlay's RBAC, and deploy/metrics-policy's NetworkPolicy.
var kustomizedKinds = map[schema.GroupVersionKind]func() runtime.Object{
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"): func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	corev1.SchemeGroupVersion.WithKind("Namespace"):           func() runtime.Object { return &corev1.Namespace{} },
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):      func() runtime.Object { return &corev1.ServiceAccount{} },
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):           func() runtime.Object { return &appsv1.DaemonSet{} },
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):         func() runtime.Object { return &rbacv1.ClusterRole{} },
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):  func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
	monitoringV1.WithKind("PrometheusRule"):                   func() runtime.Object { return &prometheusRule{} },
}

var kustomizedDecoder = func() *kjson.Serializer {
	s := runtime.NewScheme()
	for gvk, newObj := range kustomizedKinds {
		s.AddKnownTypeWithName(gvk, newObj())
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
}()

// kustomize runs the real `kubectl kustomize dir` (kubectl kubetest.Version,
// its kustomize v5) and returns what it printed; anything on stderr (a
// deprecation, a warning) fails the test.
func kustomize(t *testing.T, k *kubetest.Kubectl, dir string) []byte {
	t.Helper()
	out, stderr, err := k.Run(nil, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(stderr)) > 0 {
		t.Errorf("kubectl kustomize %s wrote on stderr: %s", dir, stderr)
	}
	return out
}

// TestKustomize: the real kubectl kustomize builds every kustomization under
// deploy/ (what `kubectl apply -k DIR` applies), without a word on stderr,
// into objects that decode strictly. An overlay inside its own base fails
// here ("cycle detected").
func TestKustomize(t *testing.T) {
	k := kubetest.NewKubectl(t)
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			for _, o := range decodeRendered(t, "kubectl kustomize "+dir, kustomize(t, k, dir)) {
				t.Logf("%s: %s %s", o.where, o.gvk.Kind, o.obj.(interface{ GetName() string }).GetName())
			}
		})
	}
}

// TestKustomizeServerDryRun gives what kubectl kustomize builds of every
// kustomization to a real kube-apiserver (internal/testing/kubetest) with the real
// `kubectl apply --dry-run=server --validate=strict`: every object accepted
// with strict field validation, no warning (kubectl prints them on stderr:
// Pod Security, deprecations, unknown fields). Pod Security's default level
// for unlabelled namespaces is baseline, as in TestAPIServer. A server dry
// run stores nothing, so the Namespaces of the output are applied first, for
// real: without them the namespaced objects would find no namespace. A
// kustomization that makes no Namespace (deploy/metrics-policy) is applied
// beside deploy/base, whose Namespaces are applied first.
func TestKustomizeServerDryRun(t *testing.T) {
	s := kubetest.StartWith(t, kubetest.Options{PodSecurityDefaultEnforce: "baseline"})
	k := s.Kubectl(t)
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			out := kustomize(t, k, dir)
			objs := decodeRendered(t, "kubectl kustomize "+dir, out)
			namespaces := namespacesOf(objs)
			if len(namespaces) == 0 {
				namespaces = namespacesOf(decodeRendered(t, "kubectl kustomize base", kustomize(t, k, "base")))
			}
			if len(namespaces) > 0 {
				if _, stderr, err := k.Run(bytes.Join(namespaces, []byte("\n---\n")), "apply", "--validate=strict", "-f", "-"); err != nil || len(stderr) > 0 {
					t.Fatalf("applying the Namespaces of %s: %v %s", dir, err, stderr)
				}
			}
			stdout, stderr, err := k.Run(out, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server of kubectl kustomize %s: %v", dir, err)
			}
			if len(bytes.TrimSpace(stderr)) > 0 {
				t.Errorf("kubectl apply --dry-run=server of kubectl kustomize %s: stderr: %s", dir, stderr)
			}
			lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
			if len(lines) != len(objs) {
				t.Errorf("kubectl apply --dry-run=server: %d lines for %d objects:\n%s", len(lines), len(objs), stdout)
			}
			for _, l := range lines {
				if !strings.HasSuffix(l, " (server dry run)") {
					t.Errorf("kubectl apply --dry-run=server: %q", l)
				}
			}
			t.Logf("kubectl apply --dry-run=server of kubectl kustomize %s:\n%s", dir, stdout)
		})
	}
}

// namespacesOf are the Namespaces among objs, as written.
func namespacesOf(objs []object) [][]byte {
	var namespaces [][]byte
	for _, o := range objs {
		if _, ok := o.obj.(*corev1.Namespace); ok {
			namespaces = append(namespaces, o.raw)
		}
	}
	return namespaces
}

// kustomized is kubectl kustomize's output of dir, decoded.
func kustomized(t *testing.T, dir string) []object {
	t.Helper()
	return decodeRendered(t, "kubectl kustomize "+dir, kustomize(t, kubetest.NewKubectl(t), dir))
}

// the returns the one object of type T in objs.
func the[T runtime.Object](t *testing.T, what string, objs []object) T {
	t.Helper()
	l := find[T](objs)
	if len(l) != 1 {
		var zero T
		t.Fatalf("%s: %d objects of type %T, want 1", what, len(l), zero)
	}
	return l[0]
}
