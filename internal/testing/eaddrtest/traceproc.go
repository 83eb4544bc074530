package eaddrtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// RunIn runs a client argv in ns as the demo does (demo.RunIn), with a
// generous wait, not a bound: a client under emulation or on a loaded machine
// may take longer to start than a person waits.
func RunIn(ctx context.Context, ns *netns.NS, argv []string) (string, int, error) {
	return demo.RunIn(ctx, ns, argv, 5*time.Minute)
}

// TraceProc is a running `eaddr trace`.
type TraceProc struct {
	t      *testing.T
	Cmd    *exec.Cmd
	Mu     sync.Mutex
	Events []JSONEvent
	Lines  []string
	Stderr *StderrLog    // eaddr's log, as startLogged captures it
	done   chan struct{} // stdout closed
	// lossOK: the test makes more events than the ring holds on purpose;
	// losses must then be counted, not absent.
	LossOK    bool
	Summaries []string // {"kind":"summary"} lines
	// onLine, when set, is called with each stdout line as it is read,
	// with mu held.
	onLine func(string)
}

// StartTrace runs `eaddr trace args...` and returns once it logged
// "attached". Cleanup stops it with SIGINT and checks it exits 0 and logs
// its totals.
func StartTrace(t *testing.T, args ...string) *TraceProc {
	t.Helper()
	return StartTraceWith(t, nil, args...)
}

// StartTraceWith is StartTrace with setup run on the command before it
// starts (nil: none).
func StartTraceWith(t *testing.T, setup func(*exec.Cmd), args ...string) *TraceProc {
	t.Helper()
	testenv.RequireRoot(t)
	p := &TraceProc{t: t, done: make(chan struct{})}
	p.Cmd = exec.Command(EaddrBin, append([]string{"trace"}, args...)...)
	if setup != nil {
		setup(p.Cmd)
	}
	// Our own pipe, not StdoutPipe: startLogged reaps the process, and Wait
	// closes a StdoutPipe while lines may still wait in it to be read.
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Stdout = w
	p.Stderr = StartLogged(t, p.Cmd)
	w.Close()
	t.Cleanup(func() { stdout.Close() })
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			testenv.ValidateLine(t, s.Text())
			if strings.Contains(s.Text(), `"kind":"summary"`) {
				p.Mu.Lock()
				p.Summaries = append(p.Summaries, s.Text())
				p.Mu.Unlock()
				continue
			}
			var ev JSONEvent
			dec := json.NewDecoder(strings.NewReader(s.Text()))
			dec.DisallowUnknownFields()
			err := dec.Decode(&ev)
			p.Mu.Lock()
			if p.onLine != nil {
				p.onLine(s.Text())
			}
			p.Lines = append(p.Lines, s.Text())
			if err != nil {
				t.Errorf("stdout line is not an event: %v: %s", err, s.Text())
			} else {
				p.Events = append(p.Events, ev)
			}
			p.Mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("eaddr trace did not stop within 30s of SIGINT; killing it")
			_ = p.Cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("eaddr trace (pid %d): stdout still open 10s after SIGKILL", p.Cmd.Process.Pid)
				return
			}
		}
		if err := p.Stderr.Wait(t, 10*time.Second, "eaddr trace: stderr still open 10s after stdout closed"); err != nil {
			t.Errorf("eaddr trace after SIGINT: %v; stderr:\n%s", err, p.Stderr.String())
		}
		if !strings.Contains(p.Stderr.String(), "msg=stopped") || (!p.LossOK && !strings.Contains(p.Stderr.String(), "lost=0")) {
			t.Errorf("no totals with lost=0 on stderr after SIGINT:\n%s", p.Stderr.String())
		}
	})
	p.Stderr.WaitFor(t, "attached", 30*time.Second)
	return p
}

// Done is closed once eaddr trace's stdout is closed: it exited.
func (p *TraceProc) Done() <-chan struct{} { return p.done }

// ForPID waits up to d for at least n events of pid and returns all of them.
func (p *TraceProc) ForPID(pid int, n int, d time.Duration) []JSONEvent {
	deadline := time.Now().Add(d)
	for {
		p.Mu.Lock()
		var out []JSONEvent
		for _, ev := range p.Events {
			if ev.Process.PID == pid {
				out = append(out, ev)
			}
		}
		p.Mu.Unlock()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pause stops the eaddr process with SIGSTOP and returns once every one of
// its threads is stopped: what the kernel reports from then on waits in the
// ring (past its size, it is lost and counted) and eaddr looks at it only
// after resume. That makes a full ring, a loss or "gone before eaddr
// looked" certain instead of hoped for from a fast generator. resume (also
// run at cleanup, before the trace is stopped) sends SIGCONT.
func (p *TraceProc) Pause(t *testing.T) (resume func()) {
	t.Helper()
	pid := p.Cmd.Process.Pid
	var once sync.Once
	resume = func() { once.Do(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if AllStopped(pid) {
			return resume
		}
		if time.Now().After(deadline) {
			t.Fatalf("eaddr (pid %d) not stopped within 30s of SIGSTOP", pid)
		}
	}
}

// AllStopped: every thread of pid is in state T (stopped).
func AllStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// pid (comm) S ...: the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// RunLong runs argv in ns like runInNS, for a client whose work grows with
// the machine's load (a storm generator): runInNS's 10 s is a client's
// bound, and 5 minutes still fail a hang. It returns the pid and the
// combined output.
func RunLong(t *testing.T, ns *netns.NS, argv ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%q did not finish within 5 minutes: %s", argv, out.String())
	}
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%q: %v", argv, err)
	}
	return cmd.Process.Pid, out.String()
}

// Run runs eaddr with args and returns stdout, stderr and the exit status.
func Run(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	return RunCmd(t, exec.CommandContext(ctx, EaddrBin, args...))
}

// RunCmd runs cmd and returns its stdout, stderr and exit status.
func RunCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
