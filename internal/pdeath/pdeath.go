// Package pdeath starts child processes that die with the process that
// started them (a test binary killed by -timeout, a tool killed by a signal),
// and not before.
//
// The kernel sends the parent-death signal (PR_SET_PDEATHSIG, Go's
// SysProcAttr.Pdeathsig) when the *thread* that forked the child exits, not
// the process. The Go runtime retires a thread whenever a goroutine ends
// while locked to it (a namespace helper that could not switch back, a test
// that dropped a capability on its thread), so a child forked from an
// ordinary thread can be SIGKILLed at any such moment, with no word in its
// log: etcd died that way under CI's TestClusterInstall, and kube-apiserver
// then waited on it until kubectl's timeout.
package pdeath

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd with a parent-death signal, SIGKILL unless
// cmd.SysProcAttr names another (the rest of it is kept), forked from a
// goroutine locked to its OS thread until the child has exited, so that no
// other goroutine can end locked on that thread meanwhile.
//
// enter, if not nil, runs first on that thread, to start the child in a
// namespace, and returns leave, which Start calls right after the fork: the
// thread then waits outside the namespace and holds no reference to it. If
// leave fails, the thread ends with the goroutine once the child has exited,
// and is never reused.
//
// The caller waits for cmd as usual (cmd.Wait): Start never reaps the child.
func Start(cmd *exec.Cmd, enter func() (leave func() error, err error)) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	started := make(chan error, 1)
	go keep(cmd, enter, started)
	return <-started
}

// keep is Start's goroutine: it forks cmd and stays locked to its thread
// until the child has exited.
func keep(cmd *exec.Cmd, enter func() (func() error, error), started chan<- error) {
	runtime.LockOSThread()
	leave := func() error { return nil }
	if enter != nil {
		var err error
		if leave, err = enter(); err != nil {
			started <- err // enter's failure may have left the thread anywhere: never unlocked
			return
		}
	}
	err := cmd.Start()
	left := leave()
	if err != nil {
		if left == nil {
			runtime.UnlockOSThread()
		}
		started <- errors.Join(err, left)
		return
	}
	// A pidfd taken before Start returns names this child and no later
	// process with its pid, whoever reaps it.
	pidfd, perr := unix.PidfdOpen(cmd.Process.Pid, 0)
	started <- nil
	if perr != nil {
		pidfd = -1 // before 5.3: by pid
	} else {
		defer unix.Close(pidfd)
	}
	waitExit(cmd.Process.Pid, pidfd)
	if left == nil {
		runtime.UnlockOSThread() // back where it was: the thread can be reused
	}
}

// waitExit blocks until the child has exited, without reaping it (WNOWAIT),
// so that the caller's cmd.Wait still gets its status; it returns at once
// (ECHILD) once the caller has reaped it.
func waitExit(pid, pidfd int) {
	var info unix.Siginfo
	for {
		var err error
		if pidfd >= 0 {
			err = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOWAIT, nil)
		} else {
			err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		}
		if err != unix.EINTR {
			return
		}
	}
}
