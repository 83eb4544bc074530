package containerd

import (
	"strconv"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// --kube-events: a pod's exhausted port range becomes one Warning Event on
// that pod (its name, namespace and UID), the verdict and the fix as its
// note; a storm of the same failure is the same Event, its count grown.
// With the API server gone, tracing goes on and what reached no Event is
// counted.
func TestKubeEvents(t *testing.T) {
	r := critest.Start(t)
	pod, app, ns := eaddrtest.ExhaustedPod(t, r, "")
	api := eaddrtest.NewEventsAPI(t)
	// --ports-interval 0: no port warning before the first wget (the pod is
	// full from the start); TestPortWarningAPIServer tests those.
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", eaddrtest.KubeconfigFor(t, api.Srv.URL, "test-token"), "--kube-events-update-interval", "200ms", "--rate-limit", "off",
		"--ports-interval", "0")
	eaddrtest.WgetFails(t, r, app, 1)
	evs := eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool { return len(evs) == 1 })
	eaddrtest.CheckPodEvent(t, evs[0], "shop", "client", pod.UID)

	eaddrtest.WgetFails(t, r, app, 20)
	evs = eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool {
		return len(evs) == 1 && evs[0].Series != nil && evs[0].Series.Count == 21
	})
	t.Logf("after 21 failures: 1 Event, count %d", evs[0].Series.Count)

	// The API server goes away: failures are still traced at once, and
	// counted as dropped at stop.
	api.Srv.Close()
	n := len(p.ForComm("wget", 0))
	eaddrtest.WgetFails(t, r, app, 3)
	if got := p.ForComm("wget", 5*time.Second); len(got) < n+3 {
		t.Fatalf("with the API server down, %d wget events, want %d", len(got), n+3)
	}
	if c := p.Stop(t); c["kube_events_dropped"] != 3 || c["kube_events_created"] != 1 {
		t.Errorf("totals %v: want 1 Event created and the 3 failures that reached none counted as dropped", c)
	}
}
