package containerd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// floodScript moves the python process into the cgroup argv[1], then fails
// bind() with EADDRNOTAVAIL argv[2] times, toward a new address each time
// in 198.18.0.0/15 (RFC 2544, on no interface): every failure a rate limit
// key of its own, as bind() on random non-local addresses makes them.
const floodScript = `import os, socket, sys
open(sys.argv[1] + "/cgroup.procs", "w").write(str(os.getpid()))
for i in range(int(sys.argv[2])):
    s = socket.socket()
    try:
        s.bind(("198.%d.%d.%d" % (18 + (i >> 16), (i >> 8) & 255, i & 255), 4242))
        sys.exit("bind succeeded")
    except OSError as e:
        if e.errno != 99:
            raise
    s.close()
`

// floodIn runs floodScript in ns and cgroup leaf for n failures; it returns
// the process's pid once it has exited.
func floodIn(t *testing.T, ns *netns.NS, leaf string, n int) int {
	t.Helper()
	cmd := exec.Command(eaddrtest.Python(t), "-c", floodScript, leaf, strconv.Itoa(n))
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	return cmd.Process.Pid
}

// A pod that fails toward 20,000 addresses while eaddr is stopped (so that
// nothing reads the ring meanwhile: a full ring is certain, not hoped for),
// then another pod that fails once: the other pod's event is written,
// nothing is lost, the flood wrote no more than its cgroup's budget
// (--rate-limit-cgroup 10/s: a burst of 10, then 10 a second), and every
// other failure of it is counted as held back by its cgroup's bucket
// (suppressed_cgroup, eaddr_suppressed_cgroup_events_total) and in the
// pod's eaddr_errors_total. Without that bucket, each address is a key with a
// full bucket of its own, the flood fills the 4 MiB ring (about 10,700
// events) and the other pod's failure is lost.
func TestFloodingPodCannotHideAnother(t *testing.T) {
	testenv.RequireRoot(t) // a netns of its own, and eaddr trace
	const n = 20000
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	_, floodLeaf, floodUID, _ := eaddrtest.PodCgroup(t)
	_, quietLeaf, quietUID, _ := eaddrtest.PodCgroup(t)
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", eaddrtest.DeadSocket(t), "--rate-limit-cgroup", "10/s",
		"--metrics-addr", "127.0.0.1:0")
	metrics := p.MetricsURL(t)
	resume := p.Pause(t)
	start := time.Now()
	flood := floodIn(t, ns, floodLeaf, n)
	took := time.Since(start)
	quiet := floodIn(t, ns, quietLeaf, 1)
	resume()
	evs := p.ForPID(quiet, 1, 15*time.Second)
	if len(evs) != 1 || evs[0].Pod == nil || evs[0].Pod.UID != quietUID {
		t.Fatalf("the quiet pod's failure after a flood of %d in %v: events %+v, want 1 of pod %s", n, took, evs, quietUID)
	}
	// The quiet pod's event came after every event of the flood (the
	// ring's order): what the flood wrote is all there.
	floods := p.ForPID(flood, 0, 0)
	held := float64(n - len(floods))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := eaddrtest.ScrapeSums(t, metrics)
		if m["eaddr_suppressed_cgroup_events_total"] == held && m["eaddr_errors_total"] == n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s on, eaddr_suppressed_cgroup_events_total %v and eaddr_errors_total %v: want %v and every failure, %d",
				m["eaddr_suppressed_cgroup_events_total"], m["eaddr_errors_total"], held, n+1)
		}
	}
	c := p.Stop(t)
	for _, ev := range floods {
		if ev.Pod == nil || ev.Pod.UID != floodUID {
			t.Fatalf("a flood event of pod %+v, want %s", ev.Pod, floodUID)
		}
	}
	t.Logf("%d failures toward as many addresses in %v, then 1 of another pod: %d of the flood written, totals %v", n, took, len(floods), c)
	if most := 10 + int(took.Seconds()*10) + 1; len(floods) > most || len(floods) < 10 {
		t.Errorf("%d events of the flood written, want 10 to %d (a burst of 10, then 10/s for %v)", len(floods), most, took)
	}
	if c["lost"] != 0 || c["suppressed_cgroup"] != n-len(floods) || c["suppressed"] != n-len(floods) {
		t.Errorf("totals %v: want nothing lost, and the flood's %d held back in suppressed and suppressed_cgroup", c, n-len(floods))
	}
}

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
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	api := eaddrtest.NewEventsAPI(t)
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", eaddrtest.KubeconfigFor(t, api.Srv.URL, "test-token"), "--kube-events-qps", "0.01",
		"--kube-events-update-interval", "10m", "--ports-interval", "0")
	pid := floodIn(t, ns, containerCgroup(t, flood), 40)
	if evs := p.ForPID(pid, 40, 30*time.Second); len(evs) != 40 || evs[0].Pod == nil || evs[0].Pod.Name != "flood" {
		t.Fatalf("%d events of the flood, want 40 of pod flood: %+v", len(evs), evs)
	}
	// The flood's Events are made before the other pod fails: its calls
	// are spent by then.
	eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool { n, _ := eventsOf(evs); return n["flood"] >= 9 })
	pid = floodIn(t, ns, containerCgroup(t, quiet), 1)
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
