package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
)

// cgroup2Mount finds the cgroup v2 mount from mountinfo (hybrid hosts have
// it at /sys/fs/cgroup/unified, pure v2 hosts at /sys/fs/cgroup).
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	mounts, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.MountPoint
		}
	}
	testenv.Skip(t, "no cgroup2 mount")
	return ""
}

// A client moved into a kubepods-style cgroup (cgroupfs layout) fails, and
// its event carries the pod UID, QoS and container ID from the cgroup path;
// with no runtime socket, that is all, with one warning.
// podCgroup makes a kubepods-style cgroup (cgroupfs layout) with a random
// pod UID and container ID under the cgroup2 mount, removed at cleanup.
func podCgroup(t *testing.T) (root, leaf, uid, cid string) {
	t.Helper()
	root = cgroup2Mount(t)
	uid, cid = randomUID(), randomHex(32)
	top := filepath.Join(root, "eaddr-test-"+cid[:8])
	leaf = filepath.Join(top, "kubepods", "besteffort", "pod"+uid, cid)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Deepest first; the processes moved in have exited by now.
		for d := leaf; strings.HasPrefix(d, top); d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	return root, leaf, uid, cid
}

// randomHex is n random bytes in hex: a container ID for n = 32.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// randomUID is a random pod UID (8-4-4-4-12 hex digits).
func randomUID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// failInCgroup runs a python client in ns, moves it into the cgroup leaf,
// then lets it fail to connect to 127.0.0.1:8080; it returns its pid.
func failInCgroup(t *testing.T, ns *netns.NS, leaf string) int {
	t.Helper()
	return connectInCgroup(t, ns, leaf, 8080)
}

// connectInCgroup is failInCgroup toward 127.0.0.1:port.
func connectInCgroup(t *testing.T, ns *netns.NS, leaf string, port int) int {
	t.Helper()
	cmd := exec.Command(python(t), "-c", fmt.Sprintf(`import socket, sys
sys.stdin.readline()
try:
    socket.socket().connect(("127.0.0.1", %d))
except OSError as e:
    print(e)
`, port))
	pid := startInCgroup(t, ns, leaf, cmd)
	cmd.Wait()
	return pid
}

// startInCgroup starts cmd in ns, where it waits for a line on stdin, moves
// it into the cgroup leaf, then sends it the line; it returns the pid. The
// caller waits for cmd; a cmd left running is killed at cleanup.
func startInCgroup(t *testing.T, ns *netns.NS, leaf string, cmd *exec.Cmd) int {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatalf("moving pid %d into %s: %v", cmd.Process.Pid, leaf, err)
	}
	io.WriteString(stdin, "go\n")
	return cmd.Process.Pid
}

// A client moved into a kubepods-style cgroup (cgroupfs layout) fails, and
// its event carries the pod UID, QoS and container ID from the cgroup path;
// with no runtime socket, that is all, with one warning.
func TestPodFromCgroup(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	root, leaf, uid, cid := podCgroup(t)
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", deadSocket(t))
	pid := failInCgroup(t, ns, leaf)
	evs := p.forPID(pid, 1, 5*time.Second)
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
	p.mu.Lock()
	warnings := strings.Count(p.stderr.String(), "no pod names") + strings.Count(p.stderr.String(), "container runtime is not answering")
	p.mu.Unlock()
	if warnings != 1 {
		t.Errorf("%d warnings about the missing runtime, want 1:\n%s", warnings, p.stderr.String())
	}
}

// deadSocket is a unix socket nobody listens on, as a runtime's is while the
// runtime is down: --cri-endpoint takes it (a missing path is a usage
// error), and every request to it fails.
func deadSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	return path
}

// An event in the node's own netns is marked host_network.
func TestHostNetwork(t *testing.T) {
	testenv.RequireRoot(t)
	py := python(t)
	p := startTrace(t)
	cmd := exec.Command(py, "-c", `import socket
try:
    socket.socket().bind(("192.0.2.1", 4242))
except OSError:
    pass
`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	evs := p.forPID(cmd.Process.Pid, 1, 5*time.Second)
	if len(evs) != 1 || !evs[0].HostNetwork || evs[0].Pod != nil {
		t.Errorf("host event: %+v", evs)
	}
}
