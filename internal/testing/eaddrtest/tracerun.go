package eaddrtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/pipeline"
)

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
		} else if t.Failed() {
			// Where a missing event went: lost, dropped, suppressed,
			// filtered, or runs of a BPF program the kernel skipped.
			t.Logf("eaddr's totals at its stop: %s", stoppedLine(p.Stderr.String()))
		}
	})
	p.Stderr.WaitFor(t, "attached", 30*time.Second)
	return p
}

// stoppedLine is the last line of log that holds eaddr's totals
// (msg=stopped); "" when none does.
func stoppedLine(log string) string {
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=stopped") {
			line = l
		}
	}
	return line
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

// LineFor returns the raw stdout line of an event (matched by time and tid).
func (p *TraceProc) LineFor(ev JSONEvent) string {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, l := range p.Lines {
		if strings.Contains(l, `"time":"`+ev.Time+`"`) {
			return l
		}
	}
	return ""
}

// ForComm waits d, then returns the events from processes named comm.
func (p *TraceProc) ForComm(comm string, d time.Duration) []JSONEvent {
	time.Sleep(d)
	p.Mu.Lock()
	defer p.Mu.Unlock()
	var out []JSONEvent
	for _, e := range p.Events {
		if e.Process.Comm == comm {
			out = append(out, e)
		}
	}
	return out
}

// WaitComm waits up to d for n events from processes named comm, and
// returns all of them.
func (p *TraceProc) WaitComm(comm string, n int, d time.Duration) []JSONEvent {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		out := p.ForComm(comm, 0)
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
	}
}

// NamesListed waits until p's runtime cache holds what the runtime listed
// when the trace started (eaddr_cache_entries{cache="cri_ids"} > 0, one
// list stores every container at once): from then on, a failure in a
// container that existed before the trace started is named as soon as it
// is read, and a name filter decides it then, also in the drain at stop.
func (p *TraceProc) NamesListed(t *testing.T) {
	t.Helper()
	base := p.MetricsURL(t)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, m := range Scrape(t, base)["eaddr_cache_entries"].GetMetric() {
			if Labels(m)["cache"] == "cri_ids" && m.GetGauge().GetValue() > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime's containers not listed within 60s; stderr:\n%s", p.Stderr.String())
		}
	}
}

// Sentinel makes this test process fail one syscall in the host netns and
// waits up to 30 s for the trace to report it: "bind" fails bind() with
// EADDRNOTAVAIL (192.0.2.1, on no interface, at a random port), "connect"
// fails a blocking connect() with ECONNREFUSED (a loopback port nothing
// listens on; reported only with --errno all). The pipeline writes events
// in the ring's order but for one case: an event held for its binary's
// analysis (pipeline.DefaultBinaryWait at most from when eaddr read it) is
// overtaken by a later one whose binary is analysed, such as this test's.
// So once the sentinel's event is out, every earlier failure's is out too
// if its process already had one out (its binary analysed or its wait
// over: its later events are not held): wait for that first, or use
// SentinelPastHolds. A "nothing arrived" check then means nothing, not
// "not yet". Failing the test when the sentinel is not seen within 30 s
// is a liveness bound, not a latency one (its binary's analysis and its
// diagnosis each wait up to their bound, longer on a busy node).
func (p *TraceProc) Sentinel(t *testing.T, kind string) {
	t.Helper()
	self := os.Getpid()
	n := len(p.ForPID(self, 0, 0))
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	want := unix.EADDRNOTAVAIL
	switch kind {
	case "bind":
		// A port of its own: the rate limit keys on the address, and other
		// tests on the node fail bind() to 192.0.2.1 too.
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: 1024 + mrand.IntN(64000), Addr: [4]byte{192, 0, 2, 1}})
	case "connect":
		want = unix.ECONNREFUSED
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: ClosedPort(t), Addr: [4]byte{127, 0, 0, 1}})
	default:
		t.Fatalf("sentinel %q: not bind or connect", kind)
	}
	if !errors.Is(err, want) {
		t.Fatalf("sentinel %s: %v, want %v", kind, err, want)
	}
	evs := p.ForPID(self, n+1, 30*time.Second)
	if len(evs) <= n {
		t.Fatalf("the sentinel %s (%v) was not reported within 30s: the trace was not listening", kind, want)
	}
	if ev := evs[n]; ev.Syscall != kind || ev.ErrnoNum != int(want) {
		t.Fatalf("sentinel event %s %s, want %s %v", ev.Syscall, ev.Errno, kind, want)
	}
}

// SentinelPastHolds is Sentinel for failures of processes that may have no
// event out yet: a first sentinel is read after them, so their holds end
// pipeline.DefaultBinaryWait after it at the latest; a second one, made
// after that, is written after every event whose hold is over (the
// pipeline releases those before it writes a new one), so after them.
func (p *TraceProc) SentinelPastHolds(t *testing.T, kind string) {
	t.Helper()
	p.Sentinel(t, kind)
	time.Sleep(pipeline.DefaultBinaryWait)
	p.Sentinel(t, kind)
}

// Count is the number of events read so far: a from for ForRow.
func (p *TraceProc) Count() int {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	return len(p.Events)
}

// ForRow returns the events in netns since the from'th: the row's
// program and its helpers, which can be the ones that fail (git runs
// git-remote-http as a grandchild, which prints through git's stderr).
// Rows run one at a time and nothing else fails in the scenario's netns.
func (p *TraceProc) ForRow(from int, netns uint64) []JSONEvent {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	var out []JSONEvent
	for _, ev := range p.Events[from:] {
		if ev.NetNS == netns {
			out = append(out, ev)
		}
	}
	return out
}

// Arrivals records when each event line was read, to compare with its time.
type Arrivals struct {
	delays []time.Duration
	Worst  time.Duration
	p      *TraceProc
}

func (p *TraceProc) ArrivalTimes() *Arrivals {
	a := &Arrivals{p: p}
	p.Mu.Lock()
	p.onLine = func(line string) {
		m := TimeRe.FindStringSubmatch(line)
		if m == nil {
			return
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			return
		}
		d := time.Since(at)
		a.delays = append(a.delays, d)
		a.Worst = max(a.Worst, d)
	}
	p.Mu.Unlock()
	return a
}

// Count is the number of event lines read.
func (a *Arrivals) Count() int {
	a.p.Mu.Lock()
	defer a.p.Mu.Unlock()
	return len(a.delays)
}

// WaitFor returns the first event for which match is true, within d.
func (p *TraceProc) WaitFor(t *testing.T, d time.Duration, match func(JSONEvent) bool) JSONEvent {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.Mu.Lock()
		for _, e := range p.Events {
			if match(e) {
				p.Mu.Unlock()
				return e
			}
		}
		p.Mu.Unlock()
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	t.Fatalf("no matching event within %v; events: %+v\nstderr: %s", d, p.Events, p.Stderr.String())
	return JSONEvent{}
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

var TimeRe = regexp.MustCompile(`^\{"schema":\d+,"kind":"failure","time":"([^"]+)"`)
