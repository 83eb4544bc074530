package kubecluster

import (
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/child"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hostPath is the PATH the node's components run with (containerd finds its
// shim and runc through it, the kubelet mount and iptables), whatever the
// test's environment.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// startProcess starts bin as a child (child.Start), its log appended to
// logPath, with the node's PATH.
func startProcess(name, logPath, bin string, args ...string) (*child.Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root"}
	return child.Start(name, logPath, cmd)
}

// stopProc sends SIGTERM to p's process group (each component is started
// in its own), SIGKILL after grace, and waits until p is gone. A component
// that needed SIGKILL is logged, not a problem: on a loaded machine a
// kube-apiserver can take longer than grace to drain, and gone is gone.
func stopProc(p Proc, grace time.Duration, logf func(string, ...any)) error {
	if !p.alive() {
		return nil
	}
	syscall.Kill(-p.Pid, syscall.SIGTERM)
	syscall.Kill(p.Pid, syscall.SIGTERM)
	if waitGone(p, grace) {
		return nil
	}
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	syscall.Kill(p.Pid, syscall.SIGKILL)
	if waitGone(p, 10*time.Second) {
		logf("%s (pid %d) did not stop within %s of SIGTERM: killed", p.Name, p.Pid, grace)
		return nil
	}
	return fmt.Errorf("%s (pid %d) still running 10 s after SIGKILL", p.Name, p.Pid)
}

// waitGone waits up to d for p to end (a zombie counts as ended).
func waitGone(p Proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.alive()
}

// processesMatching returns the live processes (not this one) whose command
// line contains one of subs.
func processesMatching(subs ...string) []int {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || procStart(pid) == 0 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		for _, s := range subs {
			if strings.Contains(cmdline, s) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
