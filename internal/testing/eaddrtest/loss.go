package eaddrtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Flood makes n failing connects toward 127.0.0.1:8080 from one process in
// ns and returns its pid; it takes as long as the machine needs.
func Flood(t *testing.T, ns *netns.NS, n int) int {
	t.Helper()
	pid, _ := RunLong(t, ns, Python(t), "-c", fmt.Sprintf(`import socket
for i in range(%d):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", 8080))
    except OSError:
        pass
    s.close()
`, n))
	return pid
}

// Totals parses the "stopped" line of a finished trace.
func Totals(t *testing.T, stderr string) map[string]int {
	t.Helper()
	var line string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "msg=stopped") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no totals in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(` ([a-z_]+)=([0-9]+)`).FindAllStringSubmatch(line, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

func (p *TraceProc) Stop(t *testing.T) map[string]int {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("eaddr trace did not close its stdout within 30s of SIGINT")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.Mu.Lock()
		s := p.Stderr.String()
		p.Mu.Unlock()
		if strings.Contains(s, "msg=stopped") {
			return Totals(t, s)
		}
	}
	t.Fatal("no totals after SIGINT")
	return nil
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
