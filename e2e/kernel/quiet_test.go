package kernel

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/pod"
)

// TestQuietWithoutKubernetes: on a machine with no pods (no kubepods
// cgroup) and no container runtime, the demo and a plain trace warn of
// nothing and say nothing about pods, also for processes that exited before
// eaddr could read /proc (the demo's clients; on a hybrid host they sit in
// the cgroup v2 root). Then the test makes a kubepods cgroup: the same
// missing runtime is a warning, since pods are expected.
func TestQuietWithoutKubernetes(t *testing.T) {
	testenv.RequireRoot(t)
	if where, found := pod.PodCgroups(); found {
		testenv.Skip(t, "this machine has pod cgroups ("+where+"): a machine without Kubernetes cannot be shown here")
	}
	for _, sock := range []string{"/run/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock", "/var/run/crio/crio.sock", "/run/cri-dockerd.sock"} {
		if isSocket(sock) {
			testenv.Skip(t, "a container runtime listens at "+sock+": a machine without one cannot be shown here")
		}
	}
	curl := testenv.Program(t, "curl", "curl") // a demo client, and the trace's below
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := eaddrtest.Run(t, ctx, "demo")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("demo on a machine without Kubernetes logged, where nothing is wrong:\n%s", errOut)
	}
	if !strings.Contains(out, "eaddr event: ") {
		t.Fatalf("the demo printed no event:\n%s", out)
	}
	if strings.Contains(out, `"pod`) {
		t.Errorf("the demo's events say something about pods:\n%s", out)
	}

	// A plain trace: a client that has exited by the time its event is read.
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	p := eaddrtest.StartTrace(t)
	pid, _ := eaddrtest.RunInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	evs := p.ForPID(pid, 1, 10*time.Second)
	if len(evs) == 0 {
		t.Fatal("no event for curl (sentinel)")
	}
	if evs[0].Pod != nil || evs[0].PodUnresolved != "" {
		t.Errorf("a host process's event says something about pods: pod %+v, pod_unresolved %q", evs[0].Pod, evs[0].PodUnresolved)
	}
	if s := p.Stderr.String(); strings.Contains(s, "level=WARN") {
		t.Errorf("trace on a machine without Kubernetes warned:\n%s", s)
	}

	// Pods expected (a kubepods cgroup), no runtime: that is worth a warning.
	eaddrtest.PodCgroup(t)
	if _, found := pod.PodCgroups(); !found {
		t.Fatal("the test's kubepods cgroup is not found by pod.PodCgroups")
	}
	q := eaddrtest.StartTrace(t)
	if s := q.Stderr.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "container runtime cannot be asked") {
		t.Errorf("pods expected and no runtime, but no warning:\n%s", s)
	}
}

func isSocket(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

// TestMissingLine: the demo names the clients it skipped and, once each, the
// packages that would add them.
func TestMissingLine(t *testing.T) {
	got := demo.MissingLine([]demo.MissingClient{{Name: "busybox wget", Package: "busybox-static"}, {Name: "busybox nc", Package: "busybox-static"}, {Name: "OpenBSD nc", Package: "netcat-openbsd"}})
	want := "not installed here, skipped: busybox wget, busybox nc, OpenBSD nc; to run them too: sudo apt-get install busybox-static netcat-openbsd"
	if got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}
