package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// podShape is one process of TestSystemdDriverCgroups: the cgroup it fails
// in, below the test's own top cgroup, and what its event must say.
type podShape struct {
	what string // for the test's messages
	path string // the cgroup's path below the test's top, as the systemd driver names it
	// the pod the event must carry; uid "" for CRI-O's conmon, whose event
	// carries no pod
	uid, cid, qos, runtime string
}

// systemdShapes are the cgroups of the production node shape (cgroup v2, the
// systemd cgroup driver) for fresh pod UIDs and container IDs: containerd's
// scope in a burstable, a besteffort and a guaranteed pod's slice, and
// CRI-O's with runc (the process in crio-<id>.scope, and beside it conmon's
// crio-conmon-<id>.scope, as CRI-O makes it with conmon_cgroup = "pod") and
// with crun (the process in crio-<id>.scope/container). The slice names carry
// the pod UID with "_" for "-", as systemd unit names do.
func systemdShapes() []podShape {
	var out []podShape
	const (
		burstable  = "kubepods-burstable.slice/kubepods-burstable-pod%s.slice"
		besteffort = "kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice"
		guaranteed = "kubepods-pod%s.slice"
	)
	for _, p := range []struct {
		what, qos, slice, runtime, scope string
		conmon                           bool // conmon's scope beside the container's
	}{
		{"containerd, burstable", "burstable", burstable, "containerd", "cri-containerd-%s.scope", false},
		{"containerd, besteffort", "besteffort", besteffort, "containerd", "cri-containerd-%s.scope", false},
		{"containerd, guaranteed", "guaranteed", guaranteed, "containerd", "cri-containerd-%s.scope", false},
		{"CRI-O with runc, burstable", "burstable", burstable, "cri-o", "crio-%s.scope", true},
		{"CRI-O with crun, besteffort", "besteffort", besteffort, "cri-o", "crio-%s.scope/container", false},
	} {
		uid, cid := eaddrtest.RandomUID(), eaddrtest.RandomHex(32)
		slice := "kubepods.slice/" + fmt.Sprintf(p.slice, strings.ReplaceAll(uid, "-", "_"))
		if p.conmon {
			// conmon first: it starts the runtime that makes the container
			out = append(out, podShape{what: "CRI-O's conmon of " + p.what, path: slice + "/crio-conmon-" + cid + ".scope"})
		}
		out = append(out, podShape{what: p.what, path: slice + "/" + fmt.Sprintf(p.scope, cid),
			uid: uid, cid: cid, qos: p.qos, runtime: p.runtime})
	}
	return out
}

// The production node shape: cgroup v2 with the systemd cgroup driver (EKS on
// AL2023 with containerd 2, GKE, AKS, OpenShift with CRI-O). In real cgroup
// directories named as kubelet, containerd and CRI-O name them (made here
// with mkdir, no systemd: the kernel sees the same cgroups), busybox wget
// fails with EADDRNOTAVAIL in an exhausted netns, exits, and its cgroups are
// removed, all while eaddr is stopped: eaddr reads each event after its
// cgroup is gone, so its path can come only from the kernel's record. Each
// event carries its cgroup's exact path, pod UID, container ID, QoS and
// runtime. CRI-O's conmon fails too, from a netns of its own as CRI-O starts
// it in the node's: its event carries no pod and no reason for the lack of
// one (conmon is CRI-O's, not the pod's), never the container it monitors.
// make kernels runs this on cgroup-v2-only guests, whose cgroup2 root hands
// the controllers down as systemd's does; on a hybrid host it runs on the v2
// mount (/sys/fs/cgroup/unified), which has none.
func TestSystemdDriverCgroups(t *testing.T) {
	busybox := testenv.Program(t, "busybox", "busybox-static")
	pods := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	node := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1") // conmon's stand-in for the node's netns
	root := eaddrtest.Cgroup2Mount(t)
	top := "eaddr-test-sd-" + eaddrtest.RandomHex(4)
	p := eaddrtest.StartTrace(t, "--netns", fmt.Sprintf("%d,%d", pods.Inode(), node.Inode()), "--cri-endpoint", eaddrtest.DeadSocket(t),
		"--explain", "off", "--diagnose=false")
	shapes := systemdShapes()
	pids := make([]int, len(shapes))
	resume := p.Pause(t)
	var made []string
	for i, s := range shapes {
		ns := pods
		if s.uid == "" {
			ns = node
		}
		leaf, dirs := makeSliceTree(t, root, top+"/"+s.path)
		made = append(made, dirs...)
		pids[i] = wgetFailsIn(t, busybox, ns, leaf)
	}
	if b, err := os.ReadFile(filepath.Join(root, top, "cgroup.subtree_control")); err == nil {
		t.Logf("controllers handed down the slices: %q", strings.TrimSpace(string(b)))
	}
	removeCgroups(t, made)
	resume()
	for i, s := range shapes {
		evs := p.ForPID(pids[i], 1, time.Minute)
		if len(evs) != 1 {
			t.Errorf("%s: %d events of pid %d, want 1", s.what, len(evs), pids[i])
			continue
		}
		checkShapeEvent(t, s, "/"+top+"/"+s.path, evs[0])
	}
}

// checkShapeEvent checks the event of shape s, whose cgroup was path.
func checkShapeEvent(t *testing.T, s podShape, path string, ev eaddrtest.JSONEvent) {
	t.Helper()
	if ev.Syscall != "connect" || ev.Errno != "EADDRNOTAVAIL" || ev.Cgroup.Path != path {
		t.Errorf("%s: %s %s in cgroup %+v, want connect EADDRNOTAVAIL in %s", s.what, ev.Syscall, ev.Errno, ev.Cgroup, path)
	}
	if s.uid == "" {
		if ev.Pod != nil || ev.PodUnresolved != "" {
			t.Errorf("%s: pod %+v, pod_unresolved %q; want neither: conmon is CRI-O's process, not the pod's", s.what, ev.Pod, ev.PodUnresolved)
			return
		}
		t.Logf("%s: %s -> no pod", s.what, path)
		return
	}
	if ev.Pod == nil || ev.Pod.UID != s.uid || ev.Pod.ContainerID != s.cid || ev.Pod.QoS != s.qos || ev.Pod.Runtime != s.runtime {
		t.Errorf("%s: pod %+v (pod_unresolved %q); want uid %s, container %s, %s, %s", s.what, ev.Pod, ev.PodUnresolved, s.uid, s.cid, s.qos, s.runtime)
		return
	}
	t.Logf("%s: %s -> pod %s container %s %s %s", s.what, path, ev.Pod.UID, ev.Pod.ContainerID[:12], ev.Pod.QoS, ev.Pod.Runtime)
}

// makeSliceTree makes the cgroup directories of rel under root that are not
// there yet, each removed at cleanup (deepest first), and returns the leaf and
// the directories it made. Every directory but the leaf hands down to its
// children the controllers its parent hands down to it, as systemd does down
// kubepods.slice (and crun in a container's scope): the kernel then refuses
// a process anywhere but in a leaf, as on a node.
func makeSliceTree(t *testing.T, root, rel string) (leaf string, made []string) {
	t.Helper()
	dir := root
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		dir = filepath.Join(dir, name)
		if err := os.Mkdir(dir, 0o755); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		made = append(made, dir)
		t.Cleanup(func() { eaddrtest.RmdirRetry(dir) })
		if i < len(parts)-1 {
			handDown(t, dir)
		}
	}
	return dir, made
}

// handDown enables in dir's cgroup.subtree_control the controllers its
// parent's enables.
func handDown(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range strings.Fields(string(b)) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			t.Fatalf("enabling %s in %s: %v", c, dir, err)
		}
	}
}

// wgetFailsIn runs busybox wget in ns, moved into the cgroup leaf before it
// connects to 127.0.0.1:8080, which fails with EADDRNOTAVAIL in an exhausted
// netns; it returns the pid once the process has exited.
func wgetFailsIn(t *testing.T, busybox string, ns *netns.NS, leaf string) int {
	t.Helper()
	cmd := exec.Command(busybox, "sh", "-c", "read go; exec "+busybox+" wget -q -O /dev/null http://127.0.0.1:8080/")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	pid := eaddrtest.StartInCgroup(t, ns, leaf, cmd)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("busybox wget in the exhausted %v succeeded: %q", ns, out.String())
	}
	return pid
}

// removeCgroups removes dirs, deepest first, as kubelet and the runtime
// remove a pod's cgroups once its processes have exited, and checks that
// they are gone.
func removeCgroups(t *testing.T, dirs []string) {
	t.Helper()
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := eaddrtest.RmdirRetry(dirs[i]); err != nil {
			t.Fatalf("removing %s after its processes exited: %v", dirs[i], err)
		}
		if _, err := os.Stat(dirs[i]); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s still there after its removal: %v", dirs[i], err)
		}
	}
}
