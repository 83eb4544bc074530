package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A server outlives the thread that called startProcess: a goroutine that
// locked its thread and ends locked (as netns.Do's do) makes the Go runtime
// retire that thread, and Pdeathsig, which follows the forking thread,
// killed etcd at such a moment (CI's TestClusterInstall/nodeport: kubectl
// waited 2 minutes on a kube-apiserver whose etcd was gone).
func TestProcessOutlivesItsStartersThread(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		p   *process
		tid int
		err error
	}
	dir := t.TempDir()
	release := make(chan struct{}) // for a starter that got the main thread, which the runtime never retires
	t.Cleanup(func() { close(release) })
	var s started
	for try := 0; ; try++ {
		ch := make(chan started, 1)
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == os.Getpid() {
				ch <- started{tid: -1}
				<-release // keeps the main thread, so the next starter is elsewhere
				runtime.UnlockOSThread()
				return
			}
			// Never unlocked: the runtime retires this thread when the goroutine ends.
			p, err := startProcess(filepath.Join(dir, "sleep.log"), sleep, "600")
			ch <- started{p, unix.Gettid(), err}
		}()
		if s = <-ch; s.tid != -1 {
			break
		}
		if try == 10 {
			t.Fatal("every starter got the main thread")
		}
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.p.stop(time.Second) })
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			break // the starter's thread has exited: a Pdeathsig of it has been sent
		}
		if time.Now().After(deadline) {
			t.Fatalf("the starter's locked thread %d did not exit", s.tid)
		}
	}
	if why := dying(s.p.cmd.Process.Pid); why != "" || s.p.exited() {
		t.Fatalf("the child (pid %d) did not outlive its starter's thread: %s (exited %v)", s.p.cmd.Process.Pid, why, s.p.exited())
	}
}

// dying says why pid is dead or about to be (gone, a zombie, SIGKILL
// pending), or "".
func dying(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return "state " + v
			}
		case "SigPnd", "ShdPnd":
			if m, err := strconv.ParseUint(v, 16, 64); err == nil && m&(1<<(unix.SIGKILL-1)) != 0 {
				return k + " has SIGKILL"
			}
		}
	}
	return ""
}
