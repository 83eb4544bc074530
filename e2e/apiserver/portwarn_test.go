package apiserver

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// fillingPod runs pod shop/client with uid and the range 40000-40009, a
// server on 127.0.0.1:8080 in its netns, and n connections toward it held
// by the test (9 of the 10 ports: 90%, no failure yet).
func fillingPod(t *testing.T, r *critest.Runtime, uid string, n int) (*critest.Container, *netns.NS, []net.Conn) {
	t.Helper()
	pod := r.RunPodUID(t, uid, "client", "shop", nil, map[string]string{"net.ipv4.ip_local_port_range": "40000 40009"})
	app := r.StartContainer(t, pod, "app", "sleep", "3600")
	ns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", pod.PausePID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	eaddrtest.AcceptAll(t, l, true)
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := ns.Dial("tcp4", "127.0.0.1:8080")
		if err != nil {
			t.Fatalf("dial %d: %v", i+1, err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return app, ns, conns
}

// TestPortWarningAPIServer (issue 25, item 4): a pod whose netns holds 9 of
// its 10 ports toward one destination gets a Warning
// EphemeralPortsNearlyExhausted Event from the port sampler, with no
// failure yet: real API server, eaddr's service account and RBAC, the
// private containerd's pod with the Pod's UID. The note names the holder
// (this test process) and the fix; `kubectl describe pod` shows it, and
// docs/kubernetes.md quotes what it printed. Then the pod's last port goes
// and busybox wget fails: its EphemeralPortsExhausted Event comes beside
// the warning, which came first.
func TestPortWarningAPIServer(t *testing.T) {
	s, uid, token := eaddrtest.APIServerWithPod(t)
	r := critest.Start(t)
	app, ns, _ := fillingPod(t, r, uid, 9)
	// The count of an Event is not updated for 10 minutes: kubectl describe
	// shows the Event as created, as docs/kubernetes.md quotes it.
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--netns", strconv.FormatUint(ns.Inode(), 10), "--kube-events",
		"--kubeconfig", s.WriteKubeconfig(t, token), "--kube-events-update-interval", "10m", "--node", "node-a",
		"--ports-interval", "300ms", "--warn", "80") // the sampler runs for --kube-events alone, no --metrics-addr
	evs := eaddrtest.WaitEvents(t, func() []eaddrtest.APIEvent { return eaddrtest.ListEvents(t, s, "shop") }, func(evs []eaddrtest.APIEvent) bool { return len(evs) >= 1 })
	if len(evs) != 1 {
		t.Fatalf("%d Events, want the one warning: %+v", len(evs), evs)
	}
	checkWarning(t, evs[0], uid)
	if lines := p.ForComm("", 0); len(p.Lines) != 0 {
		t.Errorf("the trace wrote %d lines (%d events) before any failure: %q", len(p.Lines), len(lines), p.Lines)
	}
	eaddrtest.DescribedAs(t, s, "EphemeralPortsNearlyExhausted", "../docs/kubernetes.md") // deploy/ is the working directory

	// The last port goes; the first wget fails, and gets its own Event.
	c, err := ns.Dial("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	eaddrtest.WgetFails(t, r, app, 1)
	evs = eaddrtest.WaitEvents(t, func() []eaddrtest.APIEvent { return eaddrtest.ListEvents(t, s, "shop") }, func(evs []eaddrtest.APIEvent) bool { return len(evs) == 2 })
	reasons := evs[0].Reason + " " + evs[1].Reason
	if !strings.Contains(reasons, "EphemeralPortsExhausted") || !strings.Contains(reasons, "EphemeralPortsNearlyExhausted") {
		t.Errorf("Events %q, want the warning and the failure's", reasons)
	}
	if len(p.ForComm("wget", 0)) == 0 {
		t.Error("no wget failure traced")
	}
	if c := p.Stop(t); c["kube_events_created"] != 2 || c["kube_port_warnings_dropped"] != 0 || c["kube_events_dropped"] != 0 {
		t.Errorf("totals %v: want 2 Events created, nothing dropped", c)
	}
}

// checkWarning: the warning is on the pod, with the port model's counts,
// this test process as the holder and the fix for its connections.
func checkWarning(t *testing.T, e eaddrtest.APIEvent, uid string) {
	t.Helper()
	if e.Regarding.Kind != "Pod" || e.Regarding.Name != "client" || e.Regarding.Namespace != "shop" || e.Regarding.UID != uid ||
		e.Type != "Warning" || e.Reason != "EphemeralPortsNearlyExhausted" || e.Action != "SamplePorts" || e.ReportingController != "eaddr.io/eaddr" {
		t.Errorf("Event %+v, want a Warning EphemeralPortsNearlyExhausted on pod shop/client uid %s", e, uid)
	}
	comm, err := os.ReadFile("/proc/self/comm") // the test binary's name, as eaddr reads it
	if err != nil {
		t.Fatal(err)
	}
	self := strings.TrimSpace(string(comm))
	want := "ephemeral ports nearly exhausted toward 127.0.0.1:8080: 9 of the 10 ports of 40000-40009 are taken (90%): 9 held by open connections, held by " +
		fmt.Sprintf("pid %d %s", os.Getpid(), self) + "; 1 left, then connect() to it fails with EADDRNOTAVAIL. Fix: " +
		fmt.Sprintf("pid %d (%s) holds 9 connections to this destination", os.Getpid(), self)
	if !strings.HasPrefix(e.Note, want) {
		t.Errorf("note %q\nwant it to start %q", e.Note, want)
	}
	t.Logf("Event %s/%s: %s %s: %s", e.Metadata.Namespace, e.Metadata.Name, e.Type, e.Reason, e.Note)
}
