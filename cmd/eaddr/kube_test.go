package main

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
	p := startTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--diagnose-wait", "1m", "--metrics-addr", "127.0.0.1:0")
	match := startTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--namespace", "shop", "--pod", "client", "--container", "app", "--selector", "app=client,tier=web",
		"--metrics-addr", "127.0.0.1:0")
	other := startTrace(t, "--cri-endpoint", r.Socket, "--netns", inode, "--namespace", "other", "--metrics-addr", "127.0.0.1:0")
	for _, tr := range []*traceProc{p, match, other} {
		tr.namesListed(t)
	}
	out, code := r.Exec(t, app, 20*time.Second, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/")
	t.Logf("wget in pod shop/client container app: exit %d: %s", code, strings.TrimSpace(out))
	if code == 0 {
		t.Fatal("wget succeeded in an exhausted pod")
	}
	var ev jsonEvent
	deadline := time.Now().Add(90 * time.Second) // the event waits up to a minute for its snapshot
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, e := range p.events {
			if e.Process.Comm == "wget" && e.Errno == "EADDRNOTAVAIL" {
				ev = e
			}
		}
		p.mu.Unlock()
		if ev.Process.PID != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ev.Process.PID == 0 {
		p.mu.Lock()
		t.Fatalf("no EADDRNOTAVAIL event from wget; events: %+v\nstderr: %s", p.events, p.stderr.String())
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
		checkPrediction(t, demo.Client{Name: "busybox wget"}, ev, out)
	}
	g := ev.Diagnosis
	if g == nil || !strings.HasPrefix(g.Verdict, "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 2 ports of 40000-40001 is free: 2 held by open connections") {
		t.Errorf("diagnosis %+v", g)
	}
	// The pod filters keep it, or leave it out.
	if evs := match.waitComm("wget", 1, 30*time.Second); len(evs) != 1 {
		t.Errorf("--namespace shop --pod client --container app --selector app=client,tier=web: %d events", len(evs))
	}
	// --namespace other: wget's event reached it (its only netns is the
	// pod's) and its filter counted it out; nothing was written.
	c := other.stop(t)
	other.mu.Lock()
	lines := len(other.lines)
	other.mu.Unlock()
	if c["events"] == 0 || c["filtered"] != c["events"] || lines != 0 {
		t.Errorf("--namespace other: totals %v, %d lines: want every event read and filtered, none written", c, lines)
	}
}

// forComm waits d, then returns the events from processes named comm.
func (p *traceProc) forComm(comm string, d time.Duration) []jsonEvent {
	time.Sleep(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []jsonEvent
	for _, e := range p.events {
		if e.Process.Comm == comm {
			out = append(out, e)
		}
	}
	return out
}

// waitComm waits up to d for n events from processes named comm, and
// returns all of them.
func (p *traceProc) waitComm(comm string, n int, d time.Duration) []jsonEvent {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		out := p.forComm(comm, 0)
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
	}
}

// namesListed waits until p's runtime cache holds what the runtime listed
// when the trace started (eaddr_cache_entries{cache="cri_ids"} > 0, one
// list stores every container at once): from then on, a failure in a
// container that existed before the trace started is named as soon as it
// is read, and a name filter decides it then, also in the drain at stop.
func (p *traceProc) namesListed(t *testing.T) {
	t.Helper()
	base := p.metricsURL(t)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, m := range scrape(t, base)["eaddr_cache_entries"].GetMetric() {
			if labels(m)["cache"] == "cri_ids" && m.GetGauge().GetValue() > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime's containers not listed within 60s; stderr:\n%s", p.stderr.String())
		}
	}
}
