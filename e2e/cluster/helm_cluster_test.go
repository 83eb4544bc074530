package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/deploytest"
	"github.com/eaddr/eaddr/internal/testing/helmtest"
	"github.com/eaddr/eaddr/internal/testing/kubecluster"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestHelmClusterInstall is docs/kubernetes.md's helm install on a real node
// (internal/testing/kubecluster: kubelet, containerd, kube-proxy), with the real helm
// and kubectl: `make image` imported into the node's containerd, `helm
// install eaddr deploy/helm/eaddr --set image.tag=... --set
// kubeEvents.enabled=true --wait`, the DaemonSet's pod Running and its log
// saying attached; then `helm uninstall --wait` takes the pod away.
// (TestClusterInstall does the same with kubectl apply -k.)
func TestHelmClusterInstall(t *testing.T) {
	testenv.RequireRoot(t)
	archive := makeImage(t, clusterImageTag)
	h := helmtest.New(t) // built, if it must be, before the cluster is up
	c := kubecluster.Start(t)
	if _, err := c.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
	h.Kubeconfig = c.Kubeconfig
	helm := func(args ...string) string {
		t.Helper()
		out, stderr, err := h.Run(nil, args...)
		if err != nil {
			c.DumpLogs()
			t.Fatal(err)
		}
		if len(strings.TrimSpace(string(stderr))) > 0 {
			t.Errorf("helm %s wrote on stderr: %s", strings.Join(args, " "), stderr)
		}
		t.Logf("helm %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	begin := time.Now()
	helm("install", deploytest.Release, deploytest.ChartDir, "--set", "image.tag="+clusterImageTag, "--set", "kubeEvents.enabled=true",
		"--wait", "--timeout", "2m")
	// --wait as users type it; it does not wait for the pod here: Helm's
	// DaemonSet check allows maxUnavailable (1) unready pods, all of this node's.
	pod := waitDaemonSetPod(t, c.Kubectl)
	t.Logf("DaemonSet pod %s Running %s after helm install", pod, time.Since(begin).Round(100*time.Millisecond))
	line := waitLogLine(t, c.Kubectl, []string{"-n", "eaddr", pod}, func(l string) bool { return strings.Contains(l, "level=INFO msg=attached") })
	t.Logf("eaddr's log: %s (%s after helm install)", line, time.Since(begin).Round(100*time.Millisecond))
	out, _, err := h.Run(nil, "status", deploytest.Release, "-o", "json")
	var status struct{ Info struct{ Status string } }
	if err != nil || json.Unmarshal(out, &status) != nil || status.Info.Status != "deployed" {
		t.Errorf("helm status: %v %.200s: want deployed", err, out)
	}

	helm("uninstall", deploytest.Release, "--wait", "--timeout", "2m")
	out, _, err = c.Kubectl.Run(nil, "get", "pods", "-A", "-l", "app=eaddr", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("after helm uninstall --wait, eaddr's pods: %s", s)
	}
}
