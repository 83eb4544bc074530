package eaddrtest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// RunIn runs a client argv in ns as the demo does (demo.RunIn), with a
// generous wait, not a bound: a client under emulation or on a loaded machine
// may take longer to start than a person waits.
func RunIn(ctx context.Context, ns *netns.NS, argv []string) (string, int, error) {
	return demo.RunIn(ctx, ns, argv, 5*time.Minute)
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

// RunStdin runs eaddr with stdin.
func RunStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(EaddrBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return RunCmd(t, cmd)
}

// StderrLog collects the stderr of a process line by line; String and the
// waits may be called while it is still being written.
type StderrLog struct {
	mu     sync.Mutex
	b      strings.Builder
	done   chan struct{} // closed at EOF
	exited chan struct{} // closed when cmd.Wait returned, with err
	err    error
}

// StartLogged starts cmd and reaps it itself, so cmd.Stdout must not be a
// StdoutPipe (Wait would close it under its reader): give it an os.Pipe.
// It starts cmd with its stderr read into a stderrLog through a
// pipe of its own, reaps it in one place (stderrLog.wait), and kills it when
// the test ends.
func StartLogged(t *testing.T, cmd *exec.Cmd) *StderrLog {
	t.Helper()
	testenv.RequireRoot(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := pdeath.Start(cmd, nil); err != nil { // killed with the test binary, and not before
		pr.Close()
		pw.Close()
		t.Fatal(err)
	}
	pw.Close()
	l := &StderrLog{done: make(chan struct{}), exited: make(chan struct{})}
	go func() { l.err = cmd.Wait(); close(l.exited) }()
	go func() {
		defer close(l.done)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			l.mu.Lock()
			l.b.WriteString(s.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-l.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("eaddr (pid %d) not reaped 10s after SIGKILL", cmd.Process.Pid)
		}
		pr.Close()
	})
	return l
}

func (l *StderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Wait returns cmd.Wait's error once the process has exited and its stderr
// is read to the end; it fails the test with msg when that takes over d.
func (l *StderrLog) Wait(t *testing.T, d time.Duration, msg string) error {
	t.Helper()
	deadline := time.After(d)
	for _, c := range []chan struct{}{l.exited, l.done} {
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("%s (waited %v):\n%s", msg, d, l.String())
		}
	}
	return l.err
}

// WaitFor fails the test unless s appears within d.
func (l *StderrLog) WaitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.done:
			if strings.Contains(l.String(), s) {
				return
			}
			t.Fatalf("stderr ended without %q:\n%s", s, l.String())
		case <-deadline:
			t.Fatalf("no %q on stderr within %v:\n%s", s, d, l.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
