package apiserver

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The --kube-events overlay (deploy/kube-events) as the real kubectl
// kustomize builds it: RBAC that allows creating and patching Events and
// nothing else, and the DaemonSet of deploy/base with its token mounted and
// --kube-events, everything else of the base unchanged. The default
// DaemonSet (kubectl kustomize deploy/base) stays token-less.
func TestKubeEventsOverlay(t *testing.T) {
	base := kustomized(t, "base")
	overlay := kustomized(t, "kube-events")
	role := the[*rbacv1.ClusterRole](t, "kube-events", overlay)
	binding := the[*rbacv1.ClusterRoleBinding](t, "kube-events", overlay)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, want[0].APIGroups) || !slices.Equal(role.Rules[0].Resources, want[0].Resources) ||
		!slices.Equal(role.Rules[0].Verbs, want[0].Verbs) || len(role.Rules[0].ResourceNames) > 0 || len(role.Rules[0].NonResourceURLs) > 0 {
		t.Errorf("ClusterRole rules %+v, want only %+v", role.Rules, want)
	}
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != "eaddr" || binding.Subjects[0].Namespace != "eaddr" {
		t.Errorf("binding %+v does not give the role to eaddr's service account", binding)
	}

	baseDS := the[*appsv1.DaemonSet](t, "base", base)
	if on(baseDS.Spec.Template.Spec.AutomountServiceAccountToken) || slices.Contains(baseDS.Spec.Template.Spec.Containers[0].Args, "--kube-events") {
		t.Errorf("the default DaemonSet mounts a token or has --kube-events")
	}
	if !reflect.DeepEqual(baseDS, eaddrDaemonSet(t)) {
		t.Errorf("kubectl kustomize base changed the DaemonSet of %s", daemonSetFile)
	}
	ds := the[*appsv1.DaemonSet](t, "kube-events", overlay)
	pod := ds.Spec.Template.Spec
	if !on(pod.AutomountServiceAccountToken) || pod.ServiceAccountName != "eaddr" || !slices.Contains(pod.Containers[0].Args, "--kube-events") {
		t.Errorf("the overlay's DaemonSet: automount %v, account %q, args %q", pod.AutomountServiceAccountToken, pod.ServiceAccountName, pod.Containers[0].Args)
	}
	// Nothing else changed: undo the patch's two operations, and the base's
	// DaemonSet is what is left; the base's Namespace and ServiceAccount are
	// there as they are.
	undone := ds.DeepCopy()
	undone.Spec.Template.Spec.AutomountServiceAccountToken = baseDS.Spec.Template.Spec.AutomountServiceAccountToken
	undone.Spec.Template.Spec.Containers[0].Args = slices.DeleteFunc(undone.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return a == "--kube-events" })
	if !reflect.DeepEqual(undone, baseDS) {
		t.Errorf("the overlay's DaemonSet differs from the base's in more than the token and --kube-events")
	}
	for _, kind := range []string{"Namespace", "ServiceAccount"} {
		var b, o []any
		for _, x := range base {
			if x.gvk.Kind == kind {
				b = append(b, x.obj)
			}
		}
		for _, x := range overlay {
			if x.gvk.Kind == kind {
				o = append(o, x.obj)
			}
		}
		if len(b) != 1 || !reflect.DeepEqual(b, o) {
			t.Errorf("%s: base %+v, overlay %+v: want the base's one, unchanged", kind, b, o)
		}
	}
	if got := len(overlay); got != len(base)+2 {
		t.Errorf("the overlay builds %d objects, want the base's %d and the ClusterRole and its binding", got, len(base))
	}
	k, err := os.ReadFile("kube-events/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"- ../base", "- rbac.yaml", "path: daemonset-patch.yaml", "name: eaddr", "kind: DaemonSet"} {
		if !strings.Contains(string(k), ref) {
			t.Errorf("kube-events/kustomization.yaml lacks %q", ref)
		}
	}
}

func on(b *bool) bool { return b != nil && *b }
