package apiserver

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eaddr/eaddr/internal/testing/helmtest"
)

// monitoringPeer is the default of who may scrape: every pod of the
// namespace monitoring, by the label the API server sets on every
// namespace.
var monitoringPeer = networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
	MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}

// checkMetricsPolicy returns what is wrong with np as the metrics port's
// policy for ds: in its namespace, selecting its pods, ingress only (the
// API server for --kube-events stays reachable), one rule letting only
// from reach the container's one port, the one named metrics, over TCP.
func checkMetricsPolicy(np *networkingv1.NetworkPolicy, ds *appsv1.DaemonSet, from []networkingv1.NetworkPolicyPeer) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if np.Namespace != ds.Namespace {
		bad("in namespace %q, the DaemonSet in %q", np.Namespace, ds.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, ds.Spec.Selector.MatchLabels) ||
		!sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		bad("podSelector %+v: want the DaemonSet's selector %+v, which its pods match", np.Spec.PodSelector, ds.Spec.Selector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) > 0 {
		bad("policyTypes %v, egress %v: want Ingress only", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	ports := ctr(ds).Ports
	if len(ports) != 1 || ports[0].Name != "metrics" {
		bad("the container's ports %+v: want the one named metrics, which the policy opens", ports)
	}
	if len(np.Spec.Ingress) != 1 {
		bad("%d ingress rules, want 1", len(np.Spec.Ingress))
		return p
	}
	r := np.Spec.Ingress[0]
	if len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].Port.String() != "metrics" || r.Ports[0].EndPort != nil ||
		r.Ports[0].Protocol == nil || *r.Ports[0].Protocol != corev1.ProtocolTCP {
		bad("ports %+v: want the port named metrics, TCP, alone", r.Ports)
	}
	if len(r.From) == 0 || !reflect.DeepEqual(r.From, from) {
		bad("from %+v: want %+v (none would let everyone in)", r.From, from)
	}
	return p
}

// deploy/metrics-policy, as the real kubectl kustomize builds it, is one
// NetworkPolicy that lets only the namespace monitoring reach the metrics
// port of deploy/base's DaemonSet (and of the overlays', which keep it).
func TestMetricsPolicy(t *testing.T) {
	objs := kustomized(t, "metrics-policy")
	if len(objs) != 1 {
		t.Fatalf("kubectl kustomize metrics-policy builds %d objects, want the NetworkPolicy alone", len(objs))
	}
	np := the[*networkingv1.NetworkPolicy](t, "metrics-policy", objs)
	for _, dir := range []string{"base", "kube-events", "nodeport-collisions"} {
		ds := the[*appsv1.DaemonSet](t, dir, kustomized(t, dir))
		for _, e := range checkMetricsPolicy(np, ds, []networkingv1.NetworkPolicyPeer{monitoringPeer}) {
			t.Errorf("metrics-policy beside %s: %s", dir, e)
		}
	}
}

// The chart's NetworkPolicy follows metrics.port (through the port's name)
// and metrics.networkPolicy.from, and refuses to render without metrics.
func TestChartMetricsPolicy(t *testing.T) {
	h := helmtest.New(t)
	for _, tc := range []struct {
		set  []string
		from networkingv1.NetworkPolicyPeer
	}{
		{[]string{"metrics.networkPolicy.enabled=true", "metrics.port=9700"}, monitoringPeer},
		{[]string{"metrics.networkPolicy.enabled=true", "metrics.networkPolicy.from[0].namespaceSelector.matchLabels.team=observability",
			"metrics.networkPolicy.from[0].podSelector.matchLabels.app=prometheus"},
			networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "observability"}},
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prometheus"}}}},
	} {
		what := "helm template --set " + strings.Join(tc.set, ",")
		objs := decodeRendered(t, what, helmTemplate(t, h, tc.set...))
		np, ds := the[*networkingv1.NetworkPolicy](t, what, objs), the[*appsv1.DaemonSet](t, what, objs)
		for _, e := range checkMetricsPolicy(np, ds, []networkingv1.NetworkPolicyPeer{tc.from}) {
			t.Errorf("%s: %s", what, e)
		}
	}
	if objs := decodeRendered(t, "helm template", helmTemplate(t, h)); len(find[*networkingv1.NetworkPolicy](objs)) != 0 {
		t.Error("the chart's defaults render a NetworkPolicy: it is off by default")
	}
	_, _, err := h.Run(nil, "template", release, chartDir, "--set", "metrics.networkPolicy.enabled=true", "--set", "metrics.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "metrics.enabled is false") {
		t.Errorf("helm template with the NetworkPolicy and no metrics: %v; want it refused", err)
	}
	// No peer, or an empty one, would let every pod in: the schema refuses them.
	for _, from := range []string{"[]", "[{}]"} {
		_, _, err := h.Run(nil, "template", release, chartDir, "--set", "metrics.networkPolicy.enabled=true", "--set-json", "metrics.networkPolicy.from="+from)
		if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("helm template with metrics.networkPolicy.from=%s: %v; want a schema error", from, err)
		}
	}
}
