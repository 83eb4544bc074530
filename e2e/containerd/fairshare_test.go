package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// containerCgroup is the cgroup v2 directory of c's init process.
func containerCgroup(t *testing.T, c *critest.Container) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(l, "0::"); ok {
			return filepath.Join(eaddrtest.Cgroup2Mount(t), path)
		}
	}
	t.Fatalf("no cgroup v2 line in /proc/%d/cgroup: %s", c.PID, b)
	return ""
}

// eventsOf counts evs by the pod they regard, and the folds of each.
func eventsOf(evs []eaddrtest.APIEvent) (byPod, folds map[string]int) {
	byPod, folds = map[string]int{}, map[string]int{}
	for _, e := range evs {
		byPod[e.Regarding.Name]++
		if e.Reason == "FailedTowardOtherDestinations" {
			folds[e.Regarding.Name]++
		}
	}
	return byPod, folds
}

// --kube-events, a pod that fails toward 40 addresses and another that
// fails once, with the node's budget of API calls at its burst of 10 (and
// --kube-events-qps 0.01: no more within the test): the flooding pod gets
// 8 Events of its own and one that counts its failures toward the other
// 32, and the other pod's failure still gets its Event. Without the pod's
// share, the flood's 40 Events would take the 10 calls. The pods are the
// private containerd's; the failing processes are moved into their
// containers' cgroups (the cgroup decides the pod) and a netns of the
// test's own.
func TestFloodingPodEvents(t *testing.T) {
	r := critest.Start(t)
	flood := r.StartContainer(t, r.RunPod(t, "flood", "shop", nil, nil), "app", "sleep", "3600")
	quiet := r.StartContainer(t, r.RunPod(t, "quiet", "shop", nil, nil), "app", "sleep", "3600")
	ns := testns.New(t)
	api := eaddrtest.NewEventsAPI(t)
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", eaddrtest.KubeconfigFor(t, api.Srv.URL, "test-token"), "--kube-events-qps", "0.01",
		"--kube-events-update-interval", "10m", "--ports-interval", "0")
	pid := eaddrtest.FloodBind(t, ns, containerCgroup(t, flood), 40)
	if evs := p.ForPID(pid, 40, 30*time.Second); len(evs) != 40 || evs[0].Pod == nil || evs[0].Pod.Name != "flood" {
		t.Fatalf("%d events of the flood, want 40 of pod flood: %+v", len(evs), evs)
	}
	// The flood's Events are made before the other pod fails: its calls
	// are spent by then.
	eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool { n, _ := eventsOf(evs); return n["flood"] >= 9 })
	pid = eaddrtest.FloodBind(t, ns, containerCgroup(t, quiet), 1)
	if evs := p.ForPID(pid, 1, 15*time.Second); len(evs) != 1 {
		t.Fatalf("%d events of the quiet pod, want 1", len(evs))
	}
	evs := eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool { n, _ := eventsOf(evs); return n["quiet"] == 1 })
	byPod, folds := eventsOf(evs)
	if byPod["flood"] != 9 || folds["flood"] != 1 || folds["quiet"] != 0 {
		t.Errorf("Events by pod %v, folds %v: want the flood's 8 and its fold, and the quiet pod's", byPod, folds)
	}
	if c := p.Stop(t); c["kube_events_folded"] != 32 || c["kube_events_created"] != 10 {
		t.Errorf("totals %v: want 32 folded and 10 Events made", c)
	}
}
