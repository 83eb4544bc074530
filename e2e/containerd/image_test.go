package containerd

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// The image `make image` builds traces the node it runs on. Imported into a
// real containerd and run as a kubelet runs the DaemonSet's pod (host
// network and PID namespaces; the node's BTF, cgroup hierarchy and tracefs
// mounted; the image's own ENTRYPOINT and CMD, `/eaddr trace` with default
// flags), it reports
//
//   - a bind() failure made on the host by this test process, with its pid,
//     explained from the process's executable (through the host's /proc) and
//     diagnosed in the host netns;
//   - a bind() failure by a process of another user (nobody) in another
//     netns and in a kubepods cgroup, mapped to its pod UID and container
//     ID from the cgroup path (the node's cgroup hierarchy) and diagnosed
//     in its netns, naming the holder of the port, also nobody's;
//
// and exits 0 on SIGTERM. It does so privileged, and without privileged
// with only agentCapabilities: the DaemonSet manifest's list.
func TestImageTracesHost(t *testing.T) {
	archive := eaddrtest.BuildImageArchive(t)
	r := critest.Start(t)
	r.ImportArchive(t, archive, eaddrtest.ImageRef)

	t.Run("privileged", func(t *testing.T) {
		testAgent(t, r, func() *critest.Container {
			return r.RunPrivileged(t, eaddrtest.ImageRef, eaddrtest.NodeMounts, agentArgv...)
		})
	})
	t.Run("capabilities", func(t *testing.T) {
		testAgent(t, r, func() *critest.Container {
			return r.RunHost(t, eaddrtest.ImageRef, critest.HostSecurity{Drop: []string{"ALL"}, Add: eaddrtest.AgentCapabilities}, eaddrtest.NodeMounts, agentArgv...)
		})
	})
}

// agentArgv runs the image's trace as its entrypoint and command do, with a
// diagnosis wait of a minute: a liveness bound, where the 300 ms default is
// a latency one (CI runs this beside the kernel matrix's guests and two
// busy loops; a late snapshot then reads "no diagnosis yet").
var agentArgv = []string{"/eaddr", "trace", "--diagnose-wait", "1m"}

// testAgent checks the eaddr container that start starts: see
// TestImageTracesHost.
func testAgent(t *testing.T, r *critest.Runtime, start func() *critest.Container) {
	t.Helper()
	// The pod's netns, listener and cgroup exist before the agent starts,
	// as on a node: eaddr learns cgroup paths by walking the hierarchy at
	// start and again on a miss, at most once a second, so a cgroup made
	// just before a failure may still have no path in its event.
	ns, holder := netnsWithListener(t)
	root, leaf, uid, cid := eaddrtest.PodCgroup(t)
	begin := time.Now()
	c := start()
	step := func(what string) { t.Logf("%s after %v", what, time.Since(begin).Round(time.Millisecond)) }
	if log, ok := r.WaitLog(t, c, "attached", 30*time.Second); !ok {
		exited, code := r.Exited(t, c)
		t.Fatalf("eaddr in the container did not attach within 30s (exited %v, code %d); log:\n%s", exited, code, log)
	}
	step("attached")

	eaddrtest.FailBindOnHost(t)
	ev, ok := findEvent(t, r, c, 10*time.Second, func(ev *eaddrtest.JSONEvent) bool {
		return ev.Syscall == "bind" && ev.Errno == "EADDRNOTAVAIL" && ev.Process.PID == os.Getpid() &&
			ev.Local != nil && ev.Local.IP == "192.0.2.1" && ev.Local.Port == 4242
	})
	if !ok {
		t.Fatalf("no bind EADDRNOTAVAIL event of pid %d (192.0.2.1:4242) in the container's stdout; log:\n%s", os.Getpid(), r.Logs(t, c))
	}
	step("host bind event")
	self, _ := os.Executable()
	if !ev.HostNetwork || ev.Pod != nil || ev.Process.Exe != filepath.Base(self) {
		t.Errorf("host bind: host_network %v, pod %+v, exe %q: want the node's own netns, no pod, exe %q",
			ev.HostNetwork, ev.Pod, ev.Process.Exe, filepath.Base(self))
	}
	if ev.Explain == nil || ev.Explain.Runtime != "go" {
		t.Errorf("host bind: explain %+v, want runtime go (read from /proc/%d/exe)", ev.Explain, os.Getpid())
	}
	if ev.Diagnosis == nil || !strings.Contains(ev.Diagnosis.Verdict, "192.0.2.1 is not configured") {
		t.Errorf("host bind: diagnosis %+v, want 192.0.2.1 not configured", ev.Diagnosis)
	}

	pid := failBindInCgroup(t, ns, leaf)
	ev, ok = findEvent(t, r, c, 10*time.Second, func(ev *eaddrtest.JSONEvent) bool {
		return ev.Syscall == "bind" && ev.Errno == "EADDRINUSE" && ev.Process.PID == pid
	})
	if !ok {
		t.Fatalf("no bind EADDRINUSE event of pid %d (busybox nc in %v) in the container's stdout; log:\n%s", pid, ns, r.Logs(t, c))
	}
	step("pod bind event")
	if want := strings.TrimPrefix(leaf, root); ev.Cgroup.Path != want || ev.Pod == nil || ev.Pod.UID != uid || ev.Pod.ContainerID != cid {
		t.Errorf("bind in a pod cgroup: cgroup %+v, pod %+v: want path %s, pod uid %s, container %s", ev.Cgroup, ev.Pod, want, uid, cid)
	}
	g := ev.Diagnosis
	if ev.HostNetwork || ev.NetNS != ns.Inode() || g == nil || len(g.Holders) != 1 || g.Holders[0].PID != holder || g.States["LISTEN"] != 1 {
		t.Errorf("bind in %v: netns %d, host_network %v, diagnosis %+v: want the listener pid %d (uid 65534) as holder", ns, ev.NetNS, ev.HostNetwork, g, holder)
	}

	if code := r.Stop(t, c, 10*time.Second); code != 0 {
		t.Errorf("eaddr exited %d on SIGTERM; log:\n%s", code, r.Logs(t, c))
	}
	step("stopped")
	// Other tests may run at the same time; the agent sees their failures
	// too, so losses are possible and not checked.
	if log := r.LogStream(t, c, "stderr"); !strings.Contains(log, "msg=stopped") {
		t.Errorf("no totals after SIGTERM; stderr:\n%s", log)
	}
}

// findEvent waits up to d for an event of the container's stdout that
// matches.
func findEvent(t *testing.T, r *critest.Runtime, c *critest.Container, d time.Duration, match func(*eaddrtest.JSONEvent) bool) (eaddrtest.JSONEvent, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for line := range strings.SplitSeq(r.LogStream(t, c, "stdout"), "\n") {
			var ev eaddrtest.JSONEvent
			if json.Unmarshal([]byte(line), &ev) == nil && match(&ev) {
				testenv.ValidateLine(t, line) // the image's events keep the schema too
				return ev, true
			}
		}
		if time.Now().After(deadline) {
			return eaddrtest.JSONEvent{}, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// netnsWithListener returns a fresh netns in which busybox nc, running as
// nobody (uid 65534), listens on 0.0.0.0:9090, and the listener's pid. Both
// go away when the test ends.
func netnsWithListener(t *testing.T) (*netns.NS, int) {
	t.Helper()
	ns := testns.New(t)
	cmd := exec.Command(critest.BusyboxPath, "nc", "-l", "-p", "9090")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Listening once its netns has a TCP socket listening on 9090 (probing
	// with bind() would race with nc's own bind()).
	deadline := time.Now().Add(10 * time.Second)
	for !listening(cmd.Process.Pid, 9090) {
		if time.Now().After(deadline) {
			t.Fatalf("busybox nc -l -p 9090 (pid %d) in %v not listening after 10s", cmd.Process.Pid, ns)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ns, cmd.Process.Pid
}

// listening reports whether the netns of pid has a TCP socket listening on
// port, from /proc/PID/net/tcp and tcp6.
func listening(pid, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		for line := range strings.SplitSeq(string(b), "\n") {
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if fs := strings.Fields(line); len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// failBindInCgroup runs busybox nc as nobody in ns, moves it into the
// cgroup leaf, then lets it try to listen on port 9090 too, which fails
// with EADDRINUSE ("nc: bind: Address in use"); it returns its pid.
func failBindInCgroup(t *testing.T, ns *netns.NS, leaf string) int {
	t.Helper()
	cmd := exec.Command(critest.BusyboxPath, "sh", "-c", "read go; exec "+critest.BusyboxPath+" nc -l -p 9090")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534},
		Pdeathsig:  syscall.SIGKILL,
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	pid := eaddrtest.StartInCgroup(t, ns, leaf, cmd)
	if err := cmd.Wait(); err == nil || !strings.Contains(out.String(), "bind") {
		t.Fatalf("busybox nc -l -p 9090 in %v: %v %q, want a bind failure", ns, err, out.String())
	}
	return pid
}
