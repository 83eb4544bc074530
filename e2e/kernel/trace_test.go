package kernel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// Every real client fails once with EADDRNOTAVAIL in connect(), and eaddr
// reports exactly that one event with the client's pid, comm, destination
// and the test's netns.
func TestClientsExhaustedIPv4(t *testing.T) { testClients(t, "tcp4", "127.0.0.1") }

// The same exhaustion over IPv6 (::1).
func TestClientsExhaustedIPv6(t *testing.T) { testClients(t, "tcp6", "::1") }

func testClients(t *testing.T, network, host string) {
	ns := eaddrtest.Exhausted(t, network, host)
	p := eaddrtest.StartTrace(t)
	clients, missing := demo.FindClients(host, 8080)
	clients = append(clients, cClients(t, host, 8080)...)
	for _, m := range missing {
		t.Run(m.Name, func(t *testing.T) { testenv.Missing(t, m.Name, m.Package) })
	}
	for _, cl := range clients {
		t.Run(cl.Name, func(t *testing.T) {
			pid, out := eaddrtest.RunInNS(t, ns, cl.Argv...)
			t.Logf("%s said: %s", cl.Name, strings.TrimSpace(out))
			p.ForPID(pid, 1, 5*time.Second)
			// A second event of the client, if any, is written before the
			// sentinel's: count once the sentinel is out.
			p.Sentinel(t, "bind")
			evs := p.ForPID(pid, 2, 0)
			if len(evs) != 1 {
				t.Fatalf("%d events for pid %d, want exactly 1: %+v", len(evs), pid, evs)
			}
			ev := evs[0]
			if ev.Syscall != cl.Syscall.String() || ev.Errno != "EADDRNOTAVAIL" || ev.ErrnoNum != 99 {
				t.Errorf("got %s %s/%d, want %s EADDRNOTAVAIL/99", ev.Syscall, ev.Errno, ev.ErrnoNum, cl.Syscall)
			}
			if ev.Process.Comm != cl.Comm || ev.Process.PID != pid || ev.Process.TID != pid {
				t.Errorf("process %+v, want comm %q pid %d", ev.Process, cl.Comm, pid)
			}
			if ev.Remote == nil || ev.Remote.IP != host || ev.Remote.Port != 8080 {
				t.Errorf("remote %+v, want %s port 8080", ev.Remote, host)
			}
			if ev.NetNS != ns.Inode() {
				t.Errorf("netns %d, want the test's %d", ev.NetNS, ns.Inode())
			}
			wantFamily := map[string]string{"tcp4": "inet", "tcp6": "inet6"}[network]
			if ev.Socket.Family != wantFamily || ev.Socket.Type != "stream" || ev.Socket.Protocol != "tcp" {
				t.Errorf("socket %+v, want %s stream tcp", ev.Socket, wantFamily)
			}
			if ev.Local == nil || ev.Local.Port != 0 {
				t.Errorf("local %+v, want the unbound address with port 0", ev.Local)
			}
			eaddrtest.CheckPrediction(t, cl, ev, out)
			if ev.Schema != decode.Schema || ev.Node == "" || ev.Time == "" || ev.MntNS == 0 || ev.Cgroup.ID == 0 {
				t.Errorf("envelope %+v incomplete", ev)
			}
			if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil || !strings.HasSuffix(ev.Time, "Z") {
				t.Errorf("time %q is not RFC3339Nano UTC: %v", ev.Time, err)
			}
		})
	}
}

// bind() to a port a listener holds: EADDRINUSE with the requested port;
// bind() to an address on no interface: EADDRNOTAVAIL with that address.
func TestBindFailures(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	p := eaddrtest.StartTrace(t)
	for _, tc := range []struct {
		name, ip string
		port     int
		errno    string
	}{
		{"in use", "127.0.0.1", 8080, "EADDRINUSE"},
		{"not local", "192.0.2.1", 4242, "EADDRNOTAVAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := fmt.Sprintf(`import socket
s = socket.socket()
try:
    s.bind((%q, %d))
except OSError as e:
    print(e)
`, tc.ip, tc.port)
			pid, out := eaddrtest.RunInNS(t, ns, py, "-c", script)
			evs := p.ForPID(pid, 1, 5*time.Second)
			if len(evs) != 1 {
				t.Fatalf("%d events for pid %d (python said %q), want 1", len(evs), pid, out)
			}
			ev := evs[0]
			if ev.Syscall != "bind" || ev.Errno != tc.errno {
				t.Errorf("got %s %s, want bind %s", ev.Syscall, ev.Errno, tc.errno)
			}
			if ev.Local == nil || ev.Local.IP != tc.ip || ev.Local.Port != tc.port {
				t.Errorf("local %+v, want %s:%d", ev.Local, tc.ip, tc.port)
			}
			if ev.Remote != nil {
				t.Errorf("bind event has remote %+v", ev.Remote)
			}
		})
	}
}

// 10,000 successful UDP connect() calls produce no event; the failing call
// after them does, so the test knows the tracer was listening.
func TestSuccessfulConnectsAreSilent(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	p := eaddrtest.StartTrace(t, "--errno", "all")
	script := `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(10000):
    s.connect(("127.0.0.1", 9))
try:
    socket.socket().bind(("192.0.2.1", 1))
except OSError:
    pass
`
	pid, out := eaddrtest.RunInNS(t, ns, py, "-c", script)
	evs := p.ForPID(pid, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	evs = p.ForPID(pid, 2, 0)
	if len(evs) != 1 || evs[0].Syscall != "bind" || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Fatalf("want exactly the final bind failure, got %d events %+v (python: %q)", len(evs), evs, out)
	}
}

// --errno all reports ECONNREFUSED from a blocking connect to a closed port;
// the default errnos do not.
func TestErrnoAllReportsConnRefused(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	all := eaddrtest.StartTrace(t, "--errno", "all")
	def := eaddrtest.StartTrace(t)
	script := `import socket
try:
    socket.socket().connect(("127.0.0.1", 9))  # blocking: the refusal is connect()'s own result
except OSError as e:
    print(e)
try:
    socket.socket().bind(("192.0.2.1", 1))
except OSError:
    pass
`
	pid, out := eaddrtest.RunInNS(t, ns, py, "-c", script)
	evs := all.ForPID(pid, 2, 5*time.Second)
	if len(evs) != 2 || evs[0].Errno != "ECONNREFUSED" || evs[0].ErrnoNum != 111 || evs[0].Syscall != "connect" ||
		evs[0].Remote == nil || evs[0].Remote.Port != 9 {
		t.Errorf("--errno all: want ECONNREFUSED connect to port 9 then the bind sentinel, got %+v (python: %q)", evs, out)
	}
	evs = def.ForPID(pid, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	evs = def.ForPID(pid, 2, 0)
	if len(evs) != 1 || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Errorf("default errnos: want only the EADDRNOTAVAIL sentinel, got %+v", evs)
	}
}

// --pid keeps one process and excludes the others.
func TestPIDFilter(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	// A python that waits for a line on stdin, then fails to connect.
	cmd := exec.Command(py, "-c", `import socket, sys
sys.stdin.readline()
try:
    socket.create_connection(("127.0.0.1", 8080), timeout=5)
except OSError as e:
    print(e)
`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	p := eaddrtest.StartTrace(t, "--pid", strconv.Itoa(pid))

	// Another process fails first; it must not be reported.
	other, _ := eaddrtest.RunInNS(t, ns, py, "-c", `import socket
try:
    socket.create_connection(("127.0.0.1", 8080), timeout=5)
except OSError:
    pass
`)
	io.WriteString(stdin, "go\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	evs := p.ForPID(pid, 1, 5*time.Second)
	if len(evs) != 1 || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Fatalf("want one EADDRNOTAVAIL from pid %d, got %+v", pid, evs)
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	for _, ev := range p.Events {
		if ev.Process.PID != pid {
			t.Errorf("--pid %d let through pid %d (the other client was %d)", pid, ev.Process.PID, other)
		}
	}
}

// --output table prints a header and one aligned row per event.
func TestTableOutput(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	testenv.RequireRoot(t)
	cmd := exec.Command(eaddrtest.EaddrBin, "trace", "-o", "table", "--netns", strconv.FormatUint(ns.Inode(), 10))
	stdout, w, err := os.Pipe() // not StdoutPipe: startLogged's Wait would close it under the reader
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	log := eaddrtest.StartLogged(t, cmd)
	w.Close()
	t.Cleanup(func() { stdout.Close() })
	watchdog := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // a stdout that never comes fails, not blocks
	t.Cleanup(func() {
		watchdog.Stop()
		cmd.Process.Signal(syscall.SIGINT)
		go io.Copy(io.Discard, stdout)
		if err := log.Wait(t, 30*time.Second, "eaddr trace -o table did not stop within 30s of SIGINT"); err != nil {
			t.Errorf("eaddr trace -o table after SIGINT: %v", err)
		}
	})
	log.WaitFor(t, "attached", 30*time.Second)
	pid, _ := eaddrtest.RunInNS(t, ns, py, "-c", `import socket
try:
    socket.create_connection(("127.0.0.1", 8080), timeout=5)
except OSError:
    pass
`)
	out := bufio.NewScanner(stdout)
	if !out.Scan() || !strings.HasPrefix(out.Text(), "TIME") {
		t.Fatalf("first line %q is not the header", out.Text())
	}
	header := out.Text()
	if !out.Scan() {
		t.Fatal("no row")
	}
	row := out.Text()
	for _, want := range []string{"connect", "EADDRNOTAVAIL", strconv.Itoa(pid), "python3", "127.0.0.1:8080", strconv.FormatUint(ns.Inode(), 10)} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
	if strings.Index(row, "EADDRNOTAVAIL") != strings.Index(header, "ERRNO") {
		t.Errorf("columns do not line up:\n%s\n%s", header, row)
	}
}

// eaddr demo shows curl, wget and nc failing next to eaddr's events.
func TestDemo(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := eaddrtest.Run(t, ctx, "demo")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s\n%s", code, out, errOut)
	}
	t.Log(out)
	for _, line := range strings.Split(out, "\n") {
		if ev, ok := strings.CutPrefix(line, "eaddr event: "); ok {
			testenv.ValidateLine(t, ev)
		}
	}
	clients, missing := demo.FindClients("127.0.0.1", 8080)
	for _, m := range missing {
		testenv.Missing(t, "the demo's client "+m.Name, m.Package)
	}
	if want := fmt.Sprintf("%d of %d clients failed with an event from eaddr", len(clients), len(clients)); !strings.Contains(out, want) {
		t.Errorf("demo output lacks %q", want)
	}
	for _, want := range []string{
		"Couldn't connect to server",                         // curl
		"failed: Cannot assign requested address",            // GNU wget
		"can't connect to remote host (127.0.0.1)",           // busybox
		`"comm":"curl"`, `"comm":"wget"`, `"comm":"busybox"`, // eaddr's events
		`"errno":"EADDRNOTAVAIL"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// --comm keeps only processes with that comm.
func TestCommFilter(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	p := eaddrtest.StartTrace(t, "--comm", "python3", "--netns", strconv.FormatUint(ns.Inode(), 10))
	curl := testenv.Program(t, "curl", "curl")
	curlPID, _ := eaddrtest.RunInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	pyPID, _ := eaddrtest.RunInNS(t, ns, py, "-c", `import socket
try:
    socket.socket().connect(("127.0.0.1", 8080))
except OSError:
    pass
`)
	if evs := p.ForPID(pyPID, 1, 5*time.Second); len(evs) != 1 {
		t.Fatalf("want the python3 event, got %+v", evs)
	}
	if evs := p.ForPID(curlPID, 1, 0); len(evs) != 0 {
		t.Errorf("--comm python3 let curl through: %+v", evs)
	}
}

// Without root, trace fails at once with one sentence that says what is
// needed, and exits 3 as every command does that lacks the privilege to
// look (not 1, a failure, nor 2, a usage error).
func TestTraceWithoutRoot(t *testing.T) {
	testenv.RequireRoot(t) // to be able to drop to nobody
	cmd := exec.Command(eaddrtest.EaddrBin, "trace")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3; output %q", err, out)
	}
	if !strings.Contains(string(out), "root (or CAP_BPF and CAP_PERFMON) is needed") {
		t.Errorf("output %q does not say root is needed", out)
	}
}

// cClients builds testdata/clients/connect.c twice, with gcc (glibc) and
// musl-gcc -static (musl): the same program, two wordings of one errno.
func cClients(t *testing.T, host string, port int) []demo.Client {
	t.Helper()
	dir := t.TempDir()
	var out []demo.Client
	for _, b := range []struct {
		name, cc, pkg, libc string
		flags               []string
	}{
		{"C on glibc", "gcc", "gcc", "glibc", nil},
		{"C on musl", "musl-gcc", "musl-tools", "musl", []string{"-static"}},
	} {
		bin := testenv.CompileC(t, b.cc, b.pkg, filepath.Join(dir, "connect-"+b.libc), "../../testdata/clients/connect.c", b.flags...)
		out = append(out, demo.Client{Name: b.name, Argv: []string{bin, host, strconv.Itoa(port)}, Comm: demo.CommOf(bin),
			Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, Libc: b.libc, Unknown: true})
	}
	return out
}

// A client that exits right after its failure is still classified: the
// tracer is stopped (SIGSTOP) while curl fails, exits and is reaped, so
// eaddr reads the event only when /proc/PID is gone.
func TestClassifiedAfterExit(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	curl := testenv.Program(t, "curl", "curl")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10))
	resume := p.Pause(t) // every thread stopped before curl starts
	pid, out := eaddrtest.RunInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Fatalf("curl (pid %d) still exists", pid)
	}
	resume()
	evs := p.ForPID(pid, 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events for curl, want 1", len(evs))
	}
	x := evs[0].Explain
	if x == nil || x.Runtime != "c" || x.Libc != "glibc" || x.Client != "curl" {
		t.Fatalf("curl that had exited was classified as %+v", x)
	}
	eaddrtest.CheckPrediction(t, demo.Client{Name: "curl"}, evs[0], out)
}

// --nodeport-collisions reports a connect() whose source port the kernel
// took from the NodePort range; without the flag nothing is reported.
func TestNodePortCollisions(t *testing.T) {
	testenv.RequireRoot(t)
	py := eaddrtest.Python(t)
	ns := testns.New(t)
	// The scratch netns plays a host whose range was widened into 30000-32767.
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "31000 31001"); err != nil {
		t.Fatal(err)
	}
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	eaddrtest.AcceptAll(t, l, false)
	inode := strconv.FormatUint(ns.Inode(), 10)
	on := eaddrtest.StartTrace(t, "--nodeport-collisions", "--nodeport-netns", inode)
	// The same netns without --nodeport-collisions: the check is off.
	off := eaddrtest.StartTrace(t, "--errno", "all", "--nodeport-netns", inode)
	pid, out := eaddrtest.RunInNS(t, ns, py, "-c", `import socket
s = socket.create_connection(("127.0.0.1", 8080), timeout=5)
print(s.getsockname()[1])
`)
	port, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || port < 31000 || port > 31001 {
		t.Fatalf("python's source port %q is not in 31000-31001", out)
	}
	evs := on.ForPID(pid, 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events with --nodeport-collisions, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Kind != "nodeport_collision" || ev.Syscall != "connect" || ev.Errno != "" || ev.Local == nil || ev.Local.Port != port ||
		ev.Remote == nil || ev.Remote.Port != 8080 || ev.NetNS != ns.Inode() {
		t.Errorf("collision event %+v local %+v remote %+v", ev, ev.Local, ev.Remote)
	}
	// The refused connects after python's are off's sentinels: its connect
	// program was listening, and python's event would have come first.
	off.SentinelPastHolds(t, "connect")
	if evs := off.ForPID(pid, 1, 0); len(evs) != 0 {
		t.Errorf("without the flag: %+v", evs)
	}
}

// --explain short, the default, keeps the event small for log pipelines;
// --explain full adds how every other client words the failure.
func TestExplainLevels(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	inode := strconv.FormatUint(ns.Inode(), 10)
	short := eaddrtest.StartTrace(t, "--netns", inode)
	full := eaddrtest.StartTrace(t, "--netns", inode, "--explain", "full")
	pid := eaddrtest.FailConnect(t, ns, "127.0.0.1")
	s, f := short.ForPID(pid, 1, 5*time.Second), full.ForPID(pid, 1, 5*time.Second)
	if len(s) != 1 || len(f) != 1 || s[0].Explain == nil || f[0].Explain == nil {
		t.Fatalf("events: default %+v, full %+v", s, f)
	}
	if n := len(s[0].Explain.OtherWordings); n != 0 {
		t.Errorf("the default event lists %d other wordings, want none", n)
	}
	if n := len(f[0].Explain.OtherWordings); n < 10 {
		t.Errorf("--explain full lists %d other wordings, want at least 10", n)
	}
	sl, fl := len(short.LineFor(s[0])), len(full.LineFor(f[0]))
	t.Logf("event with diagnosis: %d bytes by default, %d with --explain full", sl, fl)
	if sl == 0 || sl > 2048 {
		t.Errorf("the default event is %d bytes, want at most 2 KB", sl)
	}
}

// With --errno all, glibc's nscd probe (ENOENT, twice per lookup) is
// labelled expected, the second as its retry; a unix connect to another
// missing path is not. The python process's own failure comes last, so
// the test knows everything before it was seen.
func TestExpectedProbes(t *testing.T) {
	if _, err := os.Stat("/var/run/nscd/socket"); err == nil {
		testenv.Skip(t, "nscd runs on this machine: its socket exists")
	}
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	// The two probes come microseconds apart, within the default 50 ms on a
	// quiet machine; --retry-window 10s keeps a busy one from making them
	// two attempts (the window itself: explain.TestAttempts).
	p := eaddrtest.StartTrace(t, "--errno", "all", "--netns", strconv.FormatUint(ns.Inode(), 10), "--retry-window", "10s")
	script := `import socket, pwd
pwd.getpwnam("root")   # glibc: nscd first
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/run/eaddr-test-no-such.sock")
except OSError as e:
    print(e)
`
	pid, out := eaddrtest.RunInNS(t, ns, py, "-c", script)
	evs := p.ForPID(pid, 3, 5*time.Second)
	var nscd, other []eaddrtest.JSONEvent
	for _, ev := range evs {
		switch {
		case ev.Remote != nil && ev.Remote.Path == "/var/run/nscd/socket":
			nscd = append(nscd, ev)
		case ev.Remote != nil && ev.Remote.Path == "/run/eaddr-test-no-such.sock":
			other = append(other, ev)
		}
	}
	if len(other) != 1 || other[0].Explain == nil || other[0].Explain.Expected != "" {
		t.Fatalf("want the script's own failure once, not expected: %+v (python: %q)", other, out)
	}
	if len(nscd) != 2 {
		t.Fatalf("%d nscd probes, want 2: %+v", len(nscd), evs)
	}
	for i, ev := range nscd {
		if ev.Errno != "ENOENT" || ev.Explain == nil || !strings.Contains(ev.Explain.Expected, "nscd") {
			t.Errorf("nscd probe %d: %s, explain %+v: want ENOENT labelled expected", i+1, ev.Errno, ev.Explain)
		}
		// a failure programs cause on purpose needs no fix
		if ev.Diagnosis != nil && len(ev.Diagnosis.Fix) > 0 {
			t.Errorf("nscd probe %d: fix %q, want none for an expected failure", i+1, ev.Diagnosis.Fix)
		}
	}
	if g := other[0].Diagnosis; g == nil || len(g.Fix) == 0 {
		t.Errorf("the script's own failure: diagnosis %+v, want one with a fix", g)
	}
	if nscd[0].Attempt != 0 || nscd[1].Attempt != 2 {
		t.Errorf("nscd probes numbered %d, %d; want the second as attempt 2", nscd[0].Attempt, nscd[1].Attempt)
	}
}
