package kernel

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A client moved into a kubepods-style cgroup (cgroupfs layout) fails, and
// its event carries the pod UID, QoS and container ID from the cgroup path;
// with no runtime socket, that is all, with one warning.
func TestPodFromCgroup(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	root, leaf, uid, cid := eaddrtest.PodCgroup(t)
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", eaddrtest.DeadSocket(t))
	pid := eaddrtest.FailInCgroup(t, ns, leaf)
	evs := p.ForPID(pid, 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	ev := evs[0]
	wantPath := strings.TrimPrefix(leaf, root)
	if ev.Cgroup.Path != wantPath || ev.Pod == nil || ev.Pod.UID != uid || ev.Pod.ContainerID != cid || ev.Pod.QoS != "besteffort" || ev.Pod.Name != "" {
		t.Errorf("cgroup %+v pod %+v, want path %s uid %s container %s besteffort", ev.Cgroup, ev.Pod, wantPath, uid, cid)
	}
	if ev.HostNetwork {
		t.Error("a pod netns marked host_network")
	}
	p.Mu.Lock()
	warnings := strings.Count(p.Stderr.String(), "no pod names") + strings.Count(p.Stderr.String(), "container runtime is not answering")
	p.Mu.Unlock()
	if warnings != 1 {
		t.Errorf("%d warnings about the missing runtime, want 1:\n%s", warnings, p.Stderr.String())
	}
}

// An event in the node's own netns is marked host_network.
func TestHostNetwork(t *testing.T) {
	testenv.RequireRoot(t)
	py := eaddrtest.Python(t)
	p := eaddrtest.StartTrace(t)
	cmd := exec.Command(py, "-c", `import socket
try:
    socket.socket().bind(("192.0.2.1", 4242))
except OSError:
    pass
`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	evs := p.ForPID(cmd.Process.Pid, 1, 5*time.Second)
	if len(evs) != 1 || !evs[0].HostNetwork || evs[0].Pod != nil {
		t.Errorf("host event: %+v", evs)
	}
}
