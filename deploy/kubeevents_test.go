package deploy

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"
)

// The --kube-events overlay (deploy/kube-events): RBAC that allows creating
// and patching Events and nothing else, and the DaemonSet of
// deploy/daemonset.yaml with its token mounted and --kube-events, as
// kustomize builds it (the JSON patch applied here the way kustomize
// applies it). The default DaemonSet stays token-less.
func TestKubeEventsOverlay(t *testing.T) {
	strict := strictOverlayDecoder()
	role, binding := decodeRBAC(t, strict)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, want[0].APIGroups) || !slices.Equal(role.Rules[0].Resources, want[0].Resources) ||
		!slices.Equal(role.Rules[0].Verbs, want[0].Verbs) || len(role.Rules[0].ResourceNames) > 0 || len(role.Rules[0].NonResourceURLs) > 0 {
		t.Errorf("ClusterRole rules %+v, want only %+v", role.Rules, want)
	}
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != "eaddr" || binding.Subjects[0].Namespace != "eaddr" {
		t.Errorf("binding %+v does not give the role to eaddr's service account", binding)
	}

	base := daemonSet(t)
	if on(base.Spec.Template.Spec.AutomountServiceAccountToken) || slices.Contains(base.Spec.Template.Spec.Containers[0].Args, "--kube-events") {
		t.Errorf("the default DaemonSet mounts a token or has --kube-events")
	}
	ds := patchedDaemonSet(t, strict)
	pod := ds.Spec.Template.Spec
	if !on(pod.AutomountServiceAccountToken) || pod.ServiceAccountName != "eaddr" || !slices.Contains(pod.Containers[0].Args, "--kube-events") {
		t.Errorf("the overlay's DaemonSet: automount %v, account %q, args %q", pod.AutomountServiceAccountToken, pod.ServiceAccountName, pod.Containers[0].Args)
	}
	k, err := os.ReadFile("kube-events/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"- ..", "- rbac.yaml", "path: daemonset-patch.yaml", "name: eaddr", "kind: DaemonSet"} {
		if !strings.Contains(string(k), ref) {
			t.Errorf("kube-events/kustomization.yaml lacks %q", ref)
		}
	}
}

func on(b *bool) bool { return b != nil && *b }

// strictOverlayDecoder decodes the overlay's kinds strictly.
func strictOverlayDecoder() *kjson.Serializer {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), &rbacv1.ClusterRole{})
	s.AddKnownTypeWithName(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), &rbacv1.ClusterRoleBinding{})
	s.AddKnownTypeWithName(appsv1.SchemeGroupVersion.WithKind("DaemonSet"), &appsv1.DaemonSet{})
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
}

func decodeRBAC(t *testing.T, strict *kjson.Serializer) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	data, err := os.ReadFile("kube-events/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := strict.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("kube-events/rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			role = o
		case *rbacv1.ClusterRoleBinding:
			binding = o
		}
	}
	if role == nil || binding == nil {
		t.Fatal("kube-events/rbac.yaml: want a ClusterRole and a ClusterRoleBinding")
	}
	return role, binding
}

// daemonSet is deploy/daemonset.yaml's DaemonSet.
func daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range manifests(t) {
		if ds, ok := o.obj.(*appsv1.DaemonSet); ok {
			return ds
		}
	}
	t.Fatal("no DaemonSet in deploy/")
	return nil
}

// patchedDaemonSet applies kube-events/daemonset-patch.yaml (add and
// replace operations) to the DaemonSet and decodes the result strictly.
func patchedDaemonSet(t *testing.T, strict *kjson.Serializer) *appsv1.DaemonSet {
	t.Helper()
	b, err := yaml.Marshal(daemonSet(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	pb, err := os.ReadFile("kube-events/daemonset-patch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    any
	}
	if err := yaml.UnmarshalStrict(pb, &ops); err != nil {
		t.Fatalf("kube-events/daemonset-patch.yaml: %v", err)
	}
	for _, op := range ops {
		if err := applyOp(doc, op.Op, op.Path, op.Value); err != nil {
			t.Fatalf("kube-events/daemonset-patch.yaml: %s %s: %v", op.Op, op.Path, err)
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := strict.Decode(out, nil, &appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("the patched DaemonSet: %v", err)
	}
	return obj.(*appsv1.DaemonSet)
}

// applyOp applies one RFC 6902 add or replace; the parent must exist, and
// replace needs the target to exist, as in RFC 6902. An add to "-"
// appends to the list, written back through the list's parent.
func applyOp(doc any, op, path string, value any) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	last := parts[len(parts)-1]
	if last == "-" {
		if op != "add" || len(parts) < 2 {
			return os.ErrInvalid
		}
		m, ok := walk(doc, parts[:len(parts)-2]).(map[string]any)
		list, isList := m[parts[len(parts)-2]].([]any)
		if !ok || !isList {
			return os.ErrNotExist
		}
		m[parts[len(parts)-2]] = append(list, value)
		return nil
	}
	m, ok := walk(doc, parts[:len(parts)-1]).(map[string]any)
	if !ok {
		return os.ErrNotExist
	}
	if _, exists := m[last]; op == "replace" && !exists {
		return os.ErrNotExist
	}
	m[last] = value
	return nil
}

// walk follows map keys and list indexes; nil when a step is missing.
func walk(doc any, parts []string) any {
	for _, p := range parts {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			doc = v[i]
		default:
			return nil
		}
	}
	return doc
}
