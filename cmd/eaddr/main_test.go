package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
)

// eaddrBin is the eaddr binary built once for the tests that run it as a
// user would.
var eaddrBin string

func TestMain(m *testing.M) {
	clientTimeout = 5 * time.Minute // a generous wait for the tests' clients, not a bound
	dir, err := os.MkdirTemp("", "eaddr-test-")
	if err != nil {
		panic(err)
	}
	_ = os.Chmod(dir, 0o755) // TestTraceWithoutRoot runs it as nobody
	eaddrBin = filepath.Join(dir, "eaddr")
	build := exec.Command("go", "build", "-o", eaddrBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building eaddr: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// jsonEvent mirrors the JSON contract of docs/events.md, field for field,
// so that a renamed or retyped field fails here.
type jsonEvent struct {
	Schema   int    `json:"schema"`
	Kind     string `json:"kind"`
	Time     string `json:"time"`
	Node     string `json:"node"`
	Syscall  string `json:"syscall"`
	Errno    string `json:"errno"`
	ErrnoNum int    `json:"errno_num"`
	Process  struct {
		PID  int    `json:"pid"`
		TID  int    `json:"tid"`
		PPID int    `json:"ppid"`
		UID  int    `json:"uid"`
		Comm string `json:"comm"`
		Exe  string `json:"exe"`
		// ExeUnresolved: why exe is missing (sent once, no longer kept).
		ExeUnresolved string `json:"exe_unresolved"`
	} `json:"process"`
	Socket struct {
		FD       int    `json:"fd"`
		Family   string `json:"family"`
		Type     string `json:"type"`
		Protocol string `json:"protocol"`
		Cookie   uint64 `json:"cookie"`
	} `json:"socket"`
	Local *jsonAddr `json:"local"`
	// LocalReleased: local is the released source port of a failed connect.
	LocalReleased bool      `json:"local_released"`
	Remote        *jsonAddr `json:"remote"`
	Explain       *struct {
		Meaning       string   `json:"meaning"`
		Expected      string   `json:"expected"`
		Runtime       string   `json:"runtime"`
		Libc          string   `json:"libc"`
		Client        string   `json:"client"`
		ClientMessage string   `json:"client_message"`
		Confidence    string   `json:"confidence"`
		ClientUnknown string   `json:"client_unknown"`
		Grep          []string `json:"grep"`
		Program       string   `json:"program"`
		Retries       string   `json:"retries"`
		OtherWordings []struct {
			By   string `json:"by"`
			Text string `json:"text"`
		} `json:"other_wordings"`
	} `json:"explain"`
	Diagnosis *struct {
		Verdict     string         `json:"verdict"`
		Cause       string         `json:"cause"`
		PortRange   string         `json:"port_range"`
		Usable      int            `json:"usable_ports"`
		InUse       int            `json:"in_use"`
		Free        int            `json:"free"`
		HeldForAll  int            `json:"held_for_all"`
		Unsure      int            `json:"unsure"`
		Exhausted   bool           `json:"exhausted"`
		SocketsFrom string         `json:"sockets_from"`
		Reserved    string         `json:"reserved_ports"`
		States      map[string]int `json:"states"`
		Holders     []struct {
			PID         int    `json:"pid"`
			Comm        string `json:"comm"`
			Sockets     int    `json:"sockets"`
			PodUID      string `json:"pod_uid"`
			ContainerID string `json:"container_id"`
		} `json:"holders"`
		RemotePod *struct {
			UID, Name, Namespace string
		} `json:"remote_pod"`
		NodeLayer   json.RawMessage `json:"node_layer"` // nodelayer_test.go reads it
		Addresses   []string        `json:"addresses"`
		Fix         []string        `json:"fix"`
		HostNetwork bool            `json:"host_network"`
		Shared      bool            `json:"shared"`
		Snapshot    string          `json:"snapshot_time"`
	} `json:"diagnosis"`
	Pod *struct {
		UID         string            `json:"uid"`
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Container   string            `json:"container"`
		ContainerID string            `json:"container_id"`
		Image       string            `json:"image"`
		QoS         string            `json:"qos"`
		Runtime     string            `json:"runtime"`
		Labels      map[string]string `json:"labels"`
		Via         string            `json:"via"`
		// NamesUnresolved: why the runtime's names are missing.
		NamesUnresolved string `json:"names_unresolved"`
	} `json:"pod"`
	PodUnresolved string  `json:"pod_unresolved"`
	HostNetwork   bool    `json:"host_network"`
	Suppressed    int     `json:"suppressed"`
	Attempt       int     `json:"attempt"`
	Async         bool    `json:"async"`
	Interrupted   bool    `json:"interrupted"`
	AsyncAfterMs  float64 `json:"async_after_ms"`
	NetNS         uint64  `json:"netns"`
	MntNS         uint64  `json:"mntns"`
	Cgroup        struct {
		ID         uint64 `json:"id"`
		Path       string `json:"path"`
		Unresolved string `json:"unresolved"`
	} `json:"cgroup"`
}

type jsonAddr struct {
	IP         string `json:"ip"`
	Port       int    `json:"port"`
	Family     string `json:"family"`
	Path       string `json:"path"`
	Raw        string `json:"raw"`
	Unreadable bool   `json:"unreadable"`
	Addrlen    int    `json:"addrlen"`
}

// traceProc is a running `eaddr trace`.
type traceProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []jsonEvent
	lines  []string
	stderr *stderrLog    // eaddr's log, as startLogged captures it
	done   chan struct{} // stdout closed
	// lossOK: the test makes more events than the ring holds on purpose;
	// losses must then be counted, not absent.
	lossOK    bool
	summaries []string // {"kind":"summary"} lines
	// onLine, when set, is called with each stdout line as it is read,
	// with mu held.
	onLine func(string)
}

// startTrace runs `eaddr trace args...` and returns once it logged
// "attached". Cleanup stops it with SIGINT and checks it exits 0 and logs
// its totals.
func startTrace(t *testing.T, args ...string) *traceProc {
	t.Helper()
	return startTraceWith(t, nil, args...)
}

// startTraceWith is startTrace with setup run on the command before it
// starts (nil: none).
func startTraceWith(t *testing.T, setup func(*exec.Cmd), args ...string) *traceProc {
	t.Helper()
	testenv.RequireRoot(t)
	p := &traceProc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(eaddrBin, append([]string{"trace"}, args...)...)
	if setup != nil {
		setup(p.cmd)
	}
	// Our own pipe, not StdoutPipe: startLogged reaps the process, and Wait
	// closes a StdoutPipe while lines may still wait in it to be read.
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = w
	p.stderr = startLogged(t, p.cmd)
	w.Close()
	t.Cleanup(func() { stdout.Close() })
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			testenv.ValidateLine(t, s.Text())
			if strings.Contains(s.Text(), `"kind":"summary"`) {
				p.mu.Lock()
				p.summaries = append(p.summaries, s.Text())
				p.mu.Unlock()
				continue
			}
			var ev jsonEvent
			dec := json.NewDecoder(strings.NewReader(s.Text()))
			dec.DisallowUnknownFields()
			err := dec.Decode(&ev)
			p.mu.Lock()
			if p.onLine != nil {
				p.onLine(s.Text())
			}
			p.lines = append(p.lines, s.Text())
			if err != nil {
				t.Errorf("stdout line is not an event: %v: %s", err, s.Text())
			} else {
				p.events = append(p.events, ev)
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("eaddr trace did not stop within 30s of SIGINT; killing it")
			_ = p.cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("eaddr trace (pid %d): stdout still open 10s after SIGKILL", p.cmd.Process.Pid)
				return
			}
		}
		if err := p.stderr.wait(t, 10*time.Second, "eaddr trace: stderr still open 10s after stdout closed"); err != nil {
			t.Errorf("eaddr trace after SIGINT: %v; stderr:\n%s", err, p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "msg=stopped") || (!p.lossOK && !strings.Contains(p.stderr.String(), "lost=0")) {
			t.Errorf("no totals with lost=0 on stderr after SIGINT:\n%s", p.stderr.String())
		}
	})
	p.stderr.waitFor(t, "attached", 30*time.Second)
	return p
}

// forPID waits up to d for at least n events of pid and returns all of them.
func (p *traceProc) forPID(pid int, n int, d time.Duration) []jsonEvent {
	deadline := time.Now().Add(d)
	for {
		p.mu.Lock()
		var out []jsonEvent
		for _, ev := range p.events {
			if ev.Process.PID == pid {
				out = append(out, ev)
			}
		}
		p.mu.Unlock()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pause stops the eaddr process with SIGSTOP and returns once every one of
// its threads is stopped: what the kernel reports from then on waits in the
// ring (past its size, it is lost and counted) and eaddr looks at it only
// after resume. That makes a full ring, a loss or "gone before eaddr
// looked" certain instead of hoped for from a fast generator. resume (also
// run at cleanup, before the trace is stopped) sends SIGCONT.
func (p *traceProc) pause(t *testing.T) (resume func()) {
	t.Helper()
	pid := p.cmd.Process.Pid
	var once sync.Once
	resume = func() { once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if allStopped(pid) {
			return resume
		}
		if time.Now().After(deadline) {
			t.Fatalf("eaddr (pid %d) not stopped within 30s of SIGSTOP", pid)
		}
	}
}

// allStopped: every thread of pid is in state T (stopped).
func allStopped(pid int) bool {
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

// runLong runs argv in ns like runInNS, for a client whose work grows with
// the machine's load (a storm generator): runInNS's 10 s is a client's
// bound, and 5 minutes still fail a hang. It returns the pid and the
// combined output.
func runLong(t *testing.T, ns *netns.NS, argv ...string) (int, string) {
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

// run runs eaddr with args and returns stdout, stderr and the exit status.
func run(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	return runCmd(t, exec.CommandContext(ctx, eaddrBin, args...))
}

// runCmd runs cmd and returns its stdout, stderr and exit status.
func runCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
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

func TestUsage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args     []string
		code     int
		stderrRe string // substring of stderr
		stdoutRe string
	}{
		{[]string{}, 2, "Usage:", ""},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`, ""},
		{[]string{"trace", "--bogus"}, 2, "unknown flag: --bogus", ""},
		{[]string{"trace", "--output", "xml"}, 2, `--output: "xml" is not one of text, table or json`, ""},
		{[]string{"trace", "--errno", "ENOPE"}, 2, `unknown errno "ENOPE"`, ""},
		{[]string{"trace", "--syscall", "accept"}, 2, `"accept" is not connect or bind`, ""},
		{[]string{"trace", "--pid", "-1"}, 2, "invalid argument", ""},
		{[]string{"trace", "--ring-size", "1000"}, 2, "not a power of two", ""},
		{[]string{"trace", "extra"}, 2, "takes no arguments", ""},
		{[]string{"demo", "--port", "0"}, 2, "is not a port", ""},
		{[]string{"trace", "--netns", "no-such-netns"}, 2, `--netns "no-such-netns" is neither a namespace inode nor a name in /run/netns`, ""},
		{[]string{"trace", "--help"}, 0, "", "--errno"},
		{[]string{"help", "trace"}, 0, "", "--errno"},
		{[]string{"demo", "--help"}, 0, "", "ip_local_port_range"},
		{[]string{"help", "demo"}, 0, "", "ip_local_port_range"},
		{[]string{"help", "frobnicate"}, 2, `help: unknown command "frobnicate"`, ""},
		{[]string{"version"}, 0, "", "\ncommit: "},
		{[]string{"--version"}, 0, "", "\ngo: go1."},
		{[]string{"--help"}, 0, "", "eaddr trace"},
	} {
		out, errOut, code := run(t, ctx, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderrRe) || !strings.Contains(out, tc.stdoutRe) {
			t.Errorf("eaddr %q: exit %d, stderr %q, stdout %q; want exit %d, stderr with %q, stdout with %q",
				tc.args, code, errOut, out, tc.code, tc.stderrRe, tc.stdoutRe)
		}
		if tc.code == 2 && len(tc.args) > 0 && strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("eaddr %q: usage error is not one line: %q", tc.args, errOut)
		}
	}
}
