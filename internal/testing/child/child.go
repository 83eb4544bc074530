// Package child starts and stops the servers the tests run as their own
// children (etcd, kube-apiserver, a node's components, containerd, the
// collector): each in its own process group through pdeath.Start, its
// output in a log file, its exit seen, stopped with grace and swept.
package child

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/eaddr/eaddr/internal/pdeath"
)

// Process is a started child with its combined output in LogPath.
type Process struct {
	Name, LogPath string
	Cmd           *exec.Cmd
	done          chan struct{}
	err           error // of Wait, once done is closed
}

// Start starts cmd, its stdout and stderr appended to logPath, in its own
// process group through pdeath.Start: SIGKILLed if the test binary dies
// without running its cleanups (a panic, -timeout), and never earlier
// (forked from an ordinary thread, etcd was SIGKILLed when the runtime
// retired that thread, and kube-apiserver then waited on it until
// kubectl's timeout: CI's TestClusterInstall/nodeport, twice).
func Start(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := pdeath.Start(cmd, nil); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the child has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited says the child has exited (and was reaped).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the child's exit (Wait's error) once Exited.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Stop sends SIGTERM to the process group, SIGKILL after grace, and waits.
// killed says it took SIGKILL: not a failure (on a loaded machine a
// server can take longer than grace to shut down, and its state dies with
// it); a process that outlives SIGKILL is.
func (p *Process) Stop(grace time.Duration) (killed bool, err error) {
	if p.Exited() {
		return false, nil // already gone; its exit status was logged by whoever cared
	}
	pgid := p.Cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return false, nil
	case <-time.After(grace):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return true, nil
	case <-time.After(10 * time.Second):
		return true, errors.New("still running 10 s after SIGKILL")
	}
}

// Sweep SIGKILLs the processes pids returns until it returns none, for at
// most d.
func Sweep(pids func() []int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		left := pids()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive after SIGKILL: %v", left)
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
