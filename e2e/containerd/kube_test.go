package containerd

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// The proof that eaddr works on a node: a real containerd driven through
// CRI runs pod "client" in namespace "shop" whose sandbox sets
// ip_local_port_range to two ports; both are held toward a listener inside
// the pod; busybox wget in container "app" fails, and eaddr's event names
// the pod, namespace, container, pod UID and container ID, the pod's netns,
// what wget printed and why, and the exhausted range. Each trace has listed
// the runtime's containers before wget runs, so the names are known when the
// event is read (the names wait is not what this test is about: see
// pipeline.TestNamesWait), and the snapshot wait is a minute, so the
// diagnosis is there however busy the machine is.
func TestKubernetesPodEndToEnd(t *testing.T) {
	r := critest.Start(t)
	pod := r.RunPod(t, "client", "shop", map[string]string{"app": "client", "tier": "web"},
		map[string]string{"net.ipv4.ip_local_port_range": "40000 40001"})
	app := r.StartContainer(t, pod, "app", "sleep", "3600")

	ns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", pod.PausePID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if got, err := ns.Sysctl("net.ipv4.ip_local_port_range"); err != nil || strings.Join(strings.Fields(got), " ") != "40000 40001" {
		t.Fatalf("pod sysctl: %q %v", got, err)
	}
	// The pod's own listener and two held connections (created in the pod's
	// netns from this process: the sockets belong to the pod's netns).
	ex, err := netns.Exhaust(ns, "tcp4", net.JoinHostPort("127.0.0.1", "8080"), 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })

	inode := strconv.FormatUint(ns.Inode(), 10)
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--diagnose-wait", "1m", "--metrics-addr", "127.0.0.1:0")
	match := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--namespace", "shop", "--pod", "client", "--container", "app", "--selector", "app=client,tier=web",
		"--metrics-addr", "127.0.0.1:0")
	other := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--namespace", "other", "--metrics-addr", "127.0.0.1:0")
	for _, tr := range []*eaddrtest.TraceProc{p, match, other} {
		tr.NamesListed(t)
	}
	out, code := r.Exec(t, app, 20*time.Second, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/")
	t.Logf("wget in pod shop/client container app: exit %d: %s", code, strings.TrimSpace(out))
	if code == 0 {
		t.Fatal("wget succeeded in an exhausted pod")
	}
	var ev eaddrtest.JSONEvent
	deadline := time.Now().Add(90 * time.Second) // the event waits up to a minute for its snapshot
	for time.Now().Before(deadline) {
		p.Mu.Lock()
		for _, e := range p.Events {
			if e.Process.Comm == "wget" && e.Errno == "EADDRNOTAVAIL" {
				ev = e
			}
		}
		p.Mu.Unlock()
		if ev.Process.PID != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ev.Process.PID == 0 {
		p.Mu.Lock()
		t.Fatalf("no EADDRNOTAVAIL event from wget; events: %+v\nstderr: %s", p.Events, p.Stderr.String())
	}
	if ev.Pod == nil {
		t.Fatalf("event without a pod: %+v (cgroup %+v)", ev, ev.Cgroup)
	}
	if ev.Pod.Name != "client" || ev.Pod.Namespace != "shop" || ev.Pod.Container != "app" || ev.Pod.UID != pod.UID ||
		ev.Pod.ContainerID != app.ID || ev.Pod.QoS != "besteffort" || ev.Pod.Labels["app"] != "client" || ev.Pod.Labels["tier"] != "web" ||
		!strings.Contains(ev.Pod.Image, "eaddr-busybox") {
		t.Errorf("pod %+v, want client/shop/app uid %s container %s", ev.Pod, pod.UID, app.ID)
	}
	if ev.NetNS != ns.Inode() || ev.HostNetwork {
		t.Errorf("netns %d host %v, want the pod's %d", ev.NetNS, ev.HostNetwork, ns.Inode())
	}
	if ev.Remote == nil || ev.Remote.IP != "127.0.0.1" || ev.Remote.Port != 8080 {
		t.Errorf("remote %+v", ev.Remote)
	}
	x := ev.Explain
	if x == nil || x.Runtime != "busybox" || x.Client != "busybox wget" {
		t.Errorf("explain %+v", x)
	} else {
		eaddrtest.CheckPrediction(t, demo.Client{Name: "busybox wget"}, ev, out)
	}
	g := ev.Diagnosis
	if g == nil || !strings.HasPrefix(g.Verdict, "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 2 ports of 40000-40001 is free: 2 held by open connections") {
		t.Errorf("diagnosis %+v", g)
	}
	// The pod filters keep it, or leave it out.
	if evs := match.WaitComm("wget", 1, 30*time.Second); len(evs) != 1 {
		t.Errorf("--namespace shop --pod client --container app --selector app=client,tier=web: %d events", len(evs))
	}
	// --namespace other: wget's event reached it (its only netns is the
	// pod's) and its filter counted it out; nothing was written.
	c := other.Stop(t)
	other.Mu.Lock()
	lines := len(other.Lines)
	other.Mu.Unlock()
	if c["events"] == 0 || c["filtered"] != c["events"] || lines != 0 {
		t.Errorf("--namespace other: totals %v, %d lines: want every event read and filtered, none written", c, lines)
	}
}
