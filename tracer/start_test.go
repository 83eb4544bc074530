package tracer

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// The event's start time is the process's (its group leader's), as
// /proc/PID/stat says it, also for a failure in another thread: with the
// tgid it names the process for certain.
func TestStartTimeIsTheProcesss(t *testing.T) {
	testenv.RequireRoot(t)
	py := testenv.Program(t, "python3", "python3")
	cmd := exec.Command(py, "-c", `import socket, sys, threading
sys.stdin.readline()
def fail():
    s = socket.socket()
    try: s.bind(("192.0.2.1", 4242))
    except OSError: pass
t = threading.Thread(target=fail); t.start(); t.join()
print("done", flush=True)
sys.stdin.readline()
`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	tr := newTracer(t, Options{PID: uint32(pid)})
	io.WriteString(stdin, "go\n")
	ev, err := readOne(t, tr, 10*time.Second)
	if err != nil {
		t.Fatalf("no event from pid %d's thread: %v", pid, err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "done\n" {
		t.Fatalf("python: %q", line)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	start, _ := strconv.ParseUint(f[19], 10, 64)
	if ev.Tid == ev.Tgid {
		t.Fatalf("the failure came from the main thread (tid %d): the test needs another one", ev.Tid)
	}
	if got := ev.StartBoottime / 1e7; got != start {
		t.Errorf("start_boottime %d ns = %d ticks, /proc/%d/stat says %d (tid %d)", ev.StartBoottime, got, pid, start, ev.Tid)
	}
}
