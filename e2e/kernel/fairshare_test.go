package kernel

import (
	"strconv"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

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
	ns := testns.New(t)
	_, floodLeaf, floodUID, _ := eaddrtest.PodCgroup(t)
	_, quietLeaf, quietUID, _ := eaddrtest.PodCgroup(t)
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", eaddrtest.DeadSocket(t), "--rate-limit-cgroup", "10/s",
		"--metrics-addr", "127.0.0.1:0")
	metrics := p.MetricsURL(t)
	resume := p.Pause(t)
	start := time.Now()
	flood := eaddrtest.FloodBind(t, ns, floodLeaf, n)
	took := time.Since(start)
	quiet := eaddrtest.FloodBind(t, ns, quietLeaf, 1)
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
