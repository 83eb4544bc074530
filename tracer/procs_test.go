//go:build linux

package tracer

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A process's program identity is sent once per program: a python process
// fails twice, execs itself under another argv[0] and fails twice more, then
// exits; only then are the events read. The kernel sent the identity with
// the first event of each program only (the other two were filled from what
// the tracer kept), the program after execve() is told apart (its own argv),
// and nothing needed the process alive.
func TestProcFactsOncePerProgram(t *testing.T) {
	python := testenv.Program(t, "python3", "python3")
	code := `import os, socket, sys
if sys.argv[1] == "first":
    sys.stdin.readline()  # the tracer is attached
for _ in range(2):
    s = socket.socket()
    try:
        s.bind(("198.18.0.1", 4242))
    except OSError:
        pass
    s.close()
if sys.argv[1] == "first":
    os.execv("/proc/self/exe", ["second-program", "-c", sys.argv[2], "second", sys.argv[2]])
`
	cmd := exec.Command(python, "-c", code, "first", code)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	go_, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	tr := newTracer(t, Options{PID: pid}) // other tests' failures stay out of its ring
	go_.Write([]byte("go\n"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v: %s", err, out.String())
	}
	var args []string
	var exeIno uint64
	for deadline := time.Now().Add(5 * time.Second); len(args) < 4 && time.Now().Before(deadline); {
		ev, err := readOne(t, tr, time.Until(deadline))
		if err != nil {
			break
		}
		if ev.Flags&FlagProcSent != 0 || ev.ExeIno == 0 || (exeIno != 0 && ev.ExeIno != exeIno) {
			t.Errorf("event %d: flags %#x exe ino %d (first %d): the program's identity is missing", len(args)+1, ev.Flags, ev.ExeIno, exeIno)
		}
		exeIno = ev.ExeIno
		args = append(args, cString(ev.Args[:ev.ArgsLen]))
	}
	t.Logf("events of pid %d: argv %q; %d filled from the tracer's cache, %d forgotten", pid, args, tr.procs.filled, tr.procs.forgotten)
	if len(args) != 4 {
		t.Fatalf("%d events of pid %d, want 4", len(args), pid)
	}
	// argv[0] of the first program is what the interpreter made of it.
	if args[0] != args[1] || strings.HasPrefix(args[0], "second-program") || !strings.HasPrefix(args[2], "second-program") || args[3] != args[2] {
		t.Errorf("argv of the four events %q: want the first program's twice, then second-program's twice", args)
	}
	if tr.procs.filled < 2 {
		t.Errorf("%d events filled from the cache, want 2: the kernel sent the identity every time", tr.procs.filled)
	}
	if tr.procs.forgotten != 0 {
		t.Errorf("%d events left without identity", tr.procs.forgotten)
	}
}
