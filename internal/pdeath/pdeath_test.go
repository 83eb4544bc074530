package pdeath_test

import (
	"errors"
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

	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A child outlives the thread of the goroutine that called Start: that
// goroutine locks its thread and ends locked, so the runtime retires the
// thread, as a namespace helper's does. Then every idle thread is retired
// too. Forked from the caller's thread, or from one given back to the
// runtime after the fork, the child is SIGKILLed and this fails.
func TestChildOutlivesCallersThread(t *testing.T) {
	cmd := exec.Command(sleepPath(t), "600")
	tid := onRetiredThread(t, func() error { return pdeath.Start(cmd, nil) })
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitGone(t, tid)
	retireIdleThreads(t)
	if why := dying(cmd.Process.Pid); why != "" {
		t.Fatalf("the child (pid %d) did not outlive its caller's thread and the idle ones: %s", cmd.Process.Pid, why)
	}
}

// onRetiredThread runs start on a goroutine locked to a thread other than
// the main one (which the runtime never retires) and ends it locked; it
// returns that thread's id.
func onRetiredThread(t *testing.T, start func() error) int {
	t.Helper()
	release := make(chan struct{}) // holds a starter that got the main thread
	t.Cleanup(func() { close(release) })
	type result struct {
		tid int
		err error
	}
	for try := 0; try <= 10; try++ {
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == os.Getpid() {
				ch <- result{tid: -1}
				<-release
				runtime.UnlockOSThread()
				return
			}
			ch <- result{unix.Gettid(), start()} // never unlocked: the thread is retired
		}()
		if r := <-ch; r.tid != -1 {
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.tid
		}
	}
	t.Fatal("every starter got the main thread")
	return 0
}

// The caller's cmd.Wait gets the child's status (Start waits for the exit
// without reaping), and the rest of SysProcAttr is kept.
func TestCallerWaits(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := pdeath.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	pgid, _ := unix.Getpgid(pid) // before Wait: the child may already be a zombie, still in its group
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("cmd.Wait() = %v, want exit status 3", err)
	}
	if pgid != pid {
		t.Errorf("child's process group %d, want its own (%d): Setpgid was lost", pgid, pid)
	}
	if cmd.SysProcAttr.Pdeathsig != unix.SIGKILL {
		t.Errorf("Pdeathsig %v, want SIGKILL", cmd.SysProcAttr.Pdeathsig)
	}
}

// netns.NS.Start of a cmd with Pdeathsig forks it through Start from a thread
// inside the netns, kept, and moved back out once it has forked: the child is
// in the netns, no thread of the test is, and the child outlives the retired
// thread of its caller and every idle thread (NS.Do's thread, given back
// after the fork, would be one of them).
func TestNetNSStart(t *testing.T) {
	ns := testns.New(t) // skips (fails under EADDR_REQUIRE_BPF=1) when not root
	cmd := exec.Command(sleepPath(t), "600")
	cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	var inside []string
	tid := onRetiredThread(t, func() error {
		err := ns.Start(cmd)
		inside = threadsIn(ns.String())
		return err
	})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if len(inside) > 0 {
		t.Errorf("threads of the test still in %v once Start returned: %v (the netns would live on with them)", ns, inside)
	}
	waitGone(t, tid)
	retireIdleThreads(t)
	if why := dying(cmd.Process.Pid); why != "" {
		t.Fatalf("the child (pid %d) did not outlive its caller's thread and the idle ones: %s", cmd.Process.Pid, why)
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), &st); err != nil {
		t.Fatal(err)
	}
	if want := ns.Inode(); st.Ino != want {
		t.Errorf("child in net:[%d], want the netns net:[%d]", st.Ino, want)
	}
}

// waitGone waits until thread tid of this process has exited: a
// parent-death signal of it has then been sent.
func waitGone(t *testing.T, tid int) {
	t.Helper()
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not exit", tid)
		}
	}
}

// retireIdleThreads makes the runtime retire every thread that is not busy,
// three times over (a thread busy in one round, this goroutine's say, is
// idle in another): more goroutines than the process has threads each lock
// one and wait, so the scheduler hands them every idle thread before it
// makes new ones; then they end locked, and it waits for those threads to
// exit.
func retireIdleThreads(t *testing.T) {
	t.Helper()
	for range 3 {
		retireRound(t)
	}
}

func retireRound(t *testing.T) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := len(tasks) + 4
	tids := make(chan int, n)
	release := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == os.Getpid() {
				tids <- -1 // the main thread is never retired: give it back
				<-release
				runtime.UnlockOSThread()
				return
			}
			tids <- unix.Gettid()
			<-release // all n hold their threads at once
		}()
	}
	held := make([]int, 0, n)
	for range n {
		held = append(held, <-tids)
	}
	close(release)
	for _, tid := range held {
		if tid != -1 {
			waitGone(t, tid)
		}
	}
}

// threadsIn lists this process's threads whose netns link reads link.
func threadsIn(link string) []string {
	paths, _ := filepath.Glob("/proc/self/task/[0-9]*/ns/net")
	var in []string
	for _, p := range paths {
		if target, err := os.Readlink(p); err == nil && target == link {
			in = append(in, p)
		}
	}
	return in
}

func sleepPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dying says why pid is dead or about to be (gone, a zombie, SIGKILL
// pending), or "".
func dying(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for line := range strings.SplitSeq(string(b), "\n") {
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
