package logagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/otelcol"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A log agent from the ecosystem hands on every field of eaddr's records
// typed. eaddr's image runs as the DaemonSet's pod (kube-system/eaddr-*,
// container eaddr, the DaemonSet's capabilities and the node's CRI socket)
// under a real containerd, which writes its log in the CRI format at
// <dir>/pods/<namespace>_<pod>_<uid>/eaddr/0.log, as on a node under
// /var/log/pods. A pod whose port range is held fails three wget connects,
// and this process a bind() on the host; eaddr writes them (the pod's named
// by the runtime, with their diagnosis and explanation), and a summary a
// second. Once
// eaddr has stopped, the OpenTelemetry Collector with
// deploy/otelcol/eaddr.yaml reads that directory, and each record it hands
// on equals the line eaddr wrote, field for field, typed
// (otelcol.Check), with the namespace, pod, UID and container of the path.
func TestLogAgent(t *testing.T) {
	archive := eaddrtest.BuildImageArchive(t)
	otelcol.Binary(t) // built (or skipped) before anything starts
	r := critest.Start(t)
	r.ImportArchive(t, archive, eaddrtest.ImageRef)
	pod, app, _ := eaddrtest.ExhaustedPod(t, r, "")
	mounts := append([]critest.Mount{{HostPath: r.Socket, ContainerPath: "/run/containerd/containerd.sock"}}, eaddrtest.NodeMounts...)
	c := r.RunHost(t, eaddrtest.ImageRef, critest.HostSecurity{Drop: []string{"ALL"}, Add: eaddrtest.AgentCapabilities}, mounts,
		"/eaddr", "trace", "--explain", "short", "--cri-endpoint", "/run/containerd/containerd.sock", "--summary-interval", "1s")
	if log, ok := r.WaitLog(t, c, "attached", 30*time.Second); !ok {
		t.Fatalf("eaddr did not attach within 30s; log:\n%s", log)
	}
	eaddrtest.WgetFails(t, r, app, 3)
	eaddrtest.FailBindOnHost(t)
	named := func(ev *eaddrtest.JSONEvent) bool {
		return ev.Kind == "failure" && ev.Process.Comm == "wget" && ev.Pod != nil && ev.Pod.Name == pod.Name
	}
	hostBind := func(ev *eaddrtest.JSONEvent) bool {
		return ev.Syscall == "bind" && ev.HostNetwork && ev.Process.PID == os.Getpid()
	}
	waitLines(t, r, c, 15*time.Second, func(evs []eaddrtest.JSONEvent) bool {
		return count(evs, named) >= 3 && count(evs, hostBind) >= 1 && count(evs, func(ev *eaddrtest.JSONEvent) bool { return ev.Kind == "summary" }) >= 1
	})
	if code := r.Stop(t, c, 10*time.Second); code != 0 {
		t.Errorf("eaddr exited %d on SIGTERM; log:\n%s", code, r.Logs(t, c))
	}
	var lines []string
	for line := range strings.SplitSeq(r.LogStream(t, c, "stdout"), "\n") {
		if line != "" {
			testenv.ValidateLine(t, line)
			lines = append(lines, line)
		}
	}
	include := filepath.Join(r.Dir, "pods", "*_eaddr-*_*", "eaddr", "*.log")
	recs := otelcol.Check(t, include, lines)
	wgets := 0
	for _, rec := range recs {
		if p, ok := rec.Attributes["pod"].(map[string]any); ok && rec.Attributes["kind"] == "failure" && p["name"] == pod.Name {
			wgets++
			res := rec.Resource
			if res["k8s.namespace.name"] != c.Pod.Namespace || res["k8s.pod.name"] != c.Pod.Name || res["k8s.pod.uid"] != c.Pod.UID || res["k8s.container.name"] != c.Name {
				t.Errorf("a failure in %s/%s read from eaddr's log: resource %v, want eaddr's pod %s/%s (%s), container %s",
					pod.Namespace, pod.Name, res, c.Pod.Namespace, c.Pod.Name, c.Pod.UID, c.Name)
			}
		}
	}
	if wgets < 3 {
		t.Errorf("%d records of wget's failures in %s/%s handed on, want 3 or more", wgets, pod.Namespace, pod.Name)
	}
	t.Logf("%d lines from eaddr, %d records handed on (with its stderr), %d of wget's failures", len(lines), len(recs), wgets)
}

// waitLines waits up to d until the events on the container's stdout
// satisfy ok.
func waitLines(t *testing.T, r *critest.Runtime, c *critest.Container, d time.Duration, ok func([]eaddrtest.JSONEvent) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var evs []eaddrtest.JSONEvent
		for line := range strings.SplitSeq(r.LogStream(t, c, "stdout"), "\n") {
			var ev eaddrtest.JSONEvent
			if json.Unmarshal([]byte(line), &ev) == nil {
				evs = append(evs, ev)
			}
		}
		if ok(evs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, eaddr's stdout does not have what the test waits for:\n%s", d, r.Logs(t, c))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func count(evs []eaddrtest.JSONEvent, match func(*eaddrtest.JSONEvent) bool) int {
	n := 0
	for i := range evs {
		if match(&evs[i]) {
			n++
		}
	}
	return n
}
