package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
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
	cmd := exec.Command(python(t), "-c", floodScript, leaf, strconv.Itoa(n))
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
	const n = 20000
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	_, floodLeaf, floodUID, _ := podCgroup(t)
	_, quietLeaf, quietUID, _ := podCgroup(t)
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", deadSocket(t), "--rate-limit-cgroup", "10/s",
		"--metrics-addr", "127.0.0.1:0")
	metrics := p.metricsURL(t)
	resume := p.pause(t)
	start := time.Now()
	flood := floodIn(t, ns, floodLeaf, n)
	took := time.Since(start)
	quiet := floodIn(t, ns, quietLeaf, 1)
	resume()
	evs := p.forPID(quiet, 1, 15*time.Second)
	if len(evs) != 1 || evs[0].Pod == nil || evs[0].Pod.UID != quietUID {
		t.Fatalf("the quiet pod's failure after a flood of %d in %v: events %+v, want 1 of pod %s", n, took, evs, quietUID)
	}
	// The quiet pod's event came after every event of the flood (the
	// ring's order): what the flood wrote is all there.
	floods := p.forPID(flood, 0, 0)
	held := float64(n - len(floods))
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := scrapeSums(t, metrics)
		if m["eaddr_suppressed_cgroup_events_total"] == held && m["eaddr_errors_total"] == n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s on, eaddr_suppressed_cgroup_events_total %v and eaddr_errors_total %v: want %v and every failure, %d",
				m["eaddr_suppressed_cgroup_events_total"], m["eaddr_errors_total"], held, n+1)
		}
	}
	c := p.stop(t)
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
