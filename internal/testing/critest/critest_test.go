package critest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestPod runs a pod and a container on a private containerd, checks the
// pod's sysctls and network namespace, then checks that the runtime's
// cleanup left no process, mount, cgroup or bridge behind.
func TestPod(t *testing.T) {
	testenv.RequireRoot(t)
	var r *Runtime
	var pod *Pod
	t.Run("node", func(t *testing.T) {
		r = Start(t)
		t.Logf("Start took %v", r.StartDuration)

		pod = r.RunPod(t, "client", "shop", map[string]string{"app": "client"},
			map[string]string{"net.ipv4.ip_local_port_range": "40000 40001"})
		t.Logf("pod %s/%s uid=%s id=%s ip=%s netns=%s pause pid=%d", pod.Namespace, pod.Name, pod.UID, pod.ID, pod.IP, pod.NetNSPath, pod.PausePID)
		c := r.StartContainer(t, pod, "app", "sleep", "3600")
		t.Logf("container %s id=%s pid=%d", c.Name, c.ID, c.PID)

		out, code := r.Exec(t, c, 10*time.Second, "cat", "/proc/sys/net/ipv4/ip_local_port_range")
		if code != 0 || strings.TrimSpace(out) != "40000\t40001" {
			t.Errorf("ip_local_port_range in pod = %q (exit %d), want \"40000\\t40001\"", out, code)
		}

		begin := time.Now()
		out, code = r.Exec(t, c, 10*time.Second, "busybox", "wget", "-O", "/dev/null", "http://127.0.0.1:1/")
		took := time.Since(begin)
		t.Logf("wget 127.0.0.1:1 → exit %d in %v: %q", code, took.Round(time.Millisecond), out)
		// "refused", not a timeout: how long it took is the machine's (logged).
		if code == 0 || !strings.Contains(out, "refused") {
			t.Errorf("wget http://127.0.0.1:1/ in pod: exit %d, %q; want a refused connection", code, out)
		}

		host := nsLink(t, "/proc/self/ns/net")
		ctrNS := nsLink(t, filepath.Join("/proc", itoa(c.PID), "ns", "net"))
		pauseNS := nsLink(t, filepath.Join("/proc", itoa(pod.PausePID), "ns", "net"))
		t.Logf("netns: host %s, container %s, pause %s", host, ctrNS, pauseNS)
		if ctrNS == host {
			t.Errorf("container runs in the host network namespace %s", host)
		}
		if ctrNS != pauseNS {
			t.Errorf("container netns %s != pause netns %s", ctrNS, pauseNS)
		}
		if pod.NetNSPath != "" {
			var st1, st2 = statIno(t, pod.NetNSPath), statIno(t, filepath.Join("/proc", itoa(c.PID), "ns", "net"))
			if st1 != st2 {
				t.Errorf("NetNSPath %s inode %d != container netns inode %d", pod.NetNSPath, st1, st2)
			}
		}

		for _, x := range []struct {
			what string
			pid  int
			id   string
		}{{"sandbox", pod.PausePID, pod.ID}, {"container", c.PID, c.ID}} {
			b, err := os.ReadFile(filepath.Join("/proc", itoa(x.pid), "cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s pid %d /proc/PID/cgroup:\n%s", x.what, x.pid, b)
			want := pod.CgroupParent + "/" + x.id
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if strings.HasPrefix(line, "0::") || strings.Contains(line, ":memory:") || strings.Contains(line, ":pids:") {
					if !strings.HasSuffix(line, ":"+want) {
						t.Errorf("%s cgroup line %q, want path %s", x.what, line, want)
					}
				}
			}
		}
	})
	if r == nil {
		return // skipped or failed before Start returned
	}
	// The subtest's cleanup has run: nothing of r may be left.
	checkNoLeftovers(t, r, pod)
}

// TestCleanupAfterCrash kills containerd with SIGKILL while a pod runs (its
// shim and container processes survive it, as they do on a real node) and
// checks that the cleanup still removes everything.
func TestCleanupAfterCrash(t *testing.T) {
	testenv.RequireRoot(t)
	var r *Runtime
	var pod *Pod
	var pids []int
	t.Run("crash", func(t *testing.T) {
		r = Start(t)
		pod = r.RunPod(t, "victim", "crash", nil, nil)
		c := r.StartContainer(t, pod, "app", "sleep", "3600")
		pids = []int{pod.PausePID, c.PID}
		out, _ := exec.Command("pgrep", "-f", r.Dir).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if err := r.proc.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-r.proc.Done()
		t.Logf("killed containerd; processes that must go: %v", pids)
	})
	if r == nil {
		return
	}
	checkNoLeftovers(t, r, pod)
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", itoa(pid))); err == nil && !isZombie(pid) {
			t.Errorf("process %d still alive", pid)
		}
	}
}

// checkNoLeftovers fails if anything of r (after its cleanup) or of pod is
// left on the host: processes naming r.Dir, the pause process, mounts below
// r.Dir or of the pod's netns, the pod's cgroups, r.Dir, the bridge.
func checkNoLeftovers(t *testing.T, r *Runtime, pod *Pod) {
	t.Helper()
	if out, err := exec.Command("pgrep", "-a", "-f", r.Dir).CombinedOutput(); err == nil {
		t.Errorf("processes left behind:\n%s", out)
	}
	if pod != nil {
		if _, err := os.Stat(filepath.Join("/proc", itoa(pod.PausePID))); err == nil && !isZombie(pod.PausePID) {
			t.Errorf("pause process %d still alive", pod.PausePID)
		}
		for _, mnt := range CgroupMounts() {
			if _, err := os.Stat(filepath.Join(mnt, pod.CgroupParent)); err == nil {
				t.Errorf("cgroup %s left behind", filepath.Join(mnt, pod.CgroupParent))
			}
		}
		if pod.NetNSPath != "" {
			if _, err := os.Stat(pod.NetNSPath); err == nil {
				t.Errorf("netns %s left behind", pod.NetNSPath)
			}
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, r.Dir) || (pod != nil && pod.NetNSPath != "" && strings.Contains(line, filepath.Base(pod.NetNSPath))) {
			t.Errorf("mount left behind: %s", line)
		}
	}
	if _, err := os.Stat(r.Dir); err == nil {
		t.Errorf("%s left behind", r.Dir)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", r.Bridge)); err == nil {
		t.Errorf("bridge %s left behind", r.Bridge)
	}
}

func nsLink(t *testing.T, path string) string {
	t.Helper()
	l, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func statIno(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func itoa(i int) string { return strconv.Itoa(i) }
