package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
	"golang.org/x/sys/unix"
)

// exhausted returns a fresh netns whose two-port range is held by two
// connections to host:8080. Everything is removed when the test ends.
func exhausted(t *testing.T, network, host string) *netns.NS {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ex, err := netns.Exhaust(ns, network, net.JoinHostPort(host, "8080"), 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ns
}

// runInNS runs argv in ns and returns its pid and combined output.
func runInNS(t *testing.T, ns *netns.NS, argv ...string) (int, string) {
	t.Helper()
	out, pid, err := runIn(context.Background(), ns, argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return pid, out
}

func python(t *testing.T) string {
	t.Helper()
	p := python3()
	if p == "" {
		testenv.Missing(t, "python3", "python3")
	}
	return p
}

// Every real client fails once with EADDRNOTAVAIL in connect(), and eaddr
// reports exactly that one event with the client's pid, comm, destination
// and the test's netns.
func TestClientsExhaustedIPv4(t *testing.T) { testClients(t, "tcp4", "127.0.0.1") }

// The same exhaustion over IPv6 (::1).
func TestClientsExhaustedIPv6(t *testing.T) { testClients(t, "tcp6", "::1") }

func testClients(t *testing.T, network, host string) {
	ns := exhausted(t, network, host)
	p := startTrace(t)
	clients, missing := findClients(host, 8080)
	clients = append(clients, cClients(t, host, 8080)...)
	for _, m := range missing {
		t.Run(m.Name, func(t *testing.T) { testenv.Missing(t, m.Name, m.Package) })
	}
	for _, cl := range clients {
		t.Run(cl.Name, func(t *testing.T) {
			pid, out := runInNS(t, ns, cl.Argv...)
			t.Logf("%s said: %s", cl.Name, strings.TrimSpace(out))
			p.forPID(pid, 1, 5*time.Second)
			// A second event of the client, if any, is written before the
			// sentinel's: count once the sentinel is out.
			p.sentinel(t, "bind")
			evs := p.forPID(pid, 2, 0)
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
			checkPrediction(t, cl, ev, out)
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	p := startTrace(t)
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
			pid, out := runInNS(t, ns, py, "-c", script)
			evs := p.forPID(pid, 1, 5*time.Second)
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	p := startTrace(t, "--errno", "all")
	script := `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(10000):
    s.connect(("127.0.0.1", 9))
try:
    socket.socket().bind(("192.0.2.1", 1))
except OSError:
    pass
`
	pid, out := runInNS(t, ns, py, "-c", script)
	evs := p.forPID(pid, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	evs = p.forPID(pid, 2, 0)
	if len(evs) != 1 || evs[0].Syscall != "bind" || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Fatalf("want exactly the final bind failure, got %d events %+v (python: %q)", len(evs), evs, out)
	}
}

// --errno all reports ECONNREFUSED from a blocking connect to a closed port;
// the default errnos do not.
func TestErrnoAllReportsConnRefused(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	all := startTrace(t, "--errno", "all")
	def := startTrace(t)
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
	pid, out := runInNS(t, ns, py, "-c", script)
	evs := all.forPID(pid, 2, 5*time.Second)
	if len(evs) != 2 || evs[0].Errno != "ECONNREFUSED" || evs[0].ErrnoNum != 111 || evs[0].Syscall != "connect" ||
		evs[0].Remote == nil || evs[0].Remote.Port != 9 {
		t.Errorf("--errno all: want ECONNREFUSED connect to port 9 then the bind sentinel, got %+v (python: %q)", evs, out)
	}
	evs = def.forPID(pid, 1, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	evs = def.forPID(pid, 2, 0)
	if len(evs) != 1 || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Errorf("default errnos: want only the EADDRNOTAVAIL sentinel, got %+v", evs)
	}
}

// --pid keeps one process and excludes the others.
func TestPIDFilter(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
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
	p := startTrace(t, "--pid", strconv.Itoa(pid))

	// Another process fails first; it must not be reported.
	other, _ := runInNS(t, ns, py, "-c", `import socket
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
	evs := p.forPID(pid, 1, 5*time.Second)
	if len(evs) != 1 || evs[0].Errno != "EADDRNOTAVAIL" {
		t.Fatalf("want one EADDRNOTAVAIL from pid %d, got %+v", pid, evs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.events {
		if ev.Process.PID != pid {
			t.Errorf("--pid %d let through pid %d (the other client was %d)", pid, ev.Process.PID, other)
		}
	}
}

// --output table prints a header and one aligned row per event.
func TestTableOutput(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	testenv.RequireRoot(t)
	cmd := exec.Command(eaddrBin, "trace", "-o", "table", "--netns", strconv.FormatUint(ns.Inode(), 10))
	stdout, w, err := os.Pipe() // not StdoutPipe: startLogged's Wait would close it under the reader
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	log := startLogged(t, cmd)
	w.Close()
	t.Cleanup(func() { stdout.Close() })
	watchdog := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // a stdout that never comes fails, not blocks
	t.Cleanup(func() {
		watchdog.Stop()
		cmd.Process.Signal(syscall.SIGINT)
		go io.Copy(io.Discard, stdout)
		if err := log.wait(t, 30*time.Second, "eaddr trace -o table did not stop within 30s of SIGINT"); err != nil {
			t.Errorf("eaddr trace -o table after SIGINT: %v", err)
		}
	})
	log.waitFor(t, "attached", 30*time.Second)
	pid, _ := runInNS(t, ns, py, "-c", `import socket
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
	out, errOut, code := run(t, ctx, "demo")
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s\n%s", code, out, errOut)
	}
	t.Log(out)
	for _, line := range strings.Split(out, "\n") {
		if ev, ok := strings.CutPrefix(line, "eaddr event: "); ok {
			testenv.ValidateLine(t, ev)
		}
	}
	clients, missing := findClients("127.0.0.1", 8080)
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	p := startTrace(t, "--comm", "python3", "--netns", strconv.FormatUint(ns.Inode(), 10))
	curl := testenv.Program(t, "curl", "curl")
	curlPID, _ := runInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	pyPID, _ := runInNS(t, ns, py, "-c", `import socket
try:
    socket.socket().connect(("127.0.0.1", 8080))
except OSError:
    pass
`)
	if evs := p.forPID(pyPID, 1, 5*time.Second); len(evs) != 1 {
		t.Fatalf("want the python3 event, got %+v", evs)
	}
	if evs := p.forPID(curlPID, 1, 0); len(evs) != 0 {
		t.Errorf("--comm python3 let curl through: %+v", evs)
	}
}

// Without root, trace fails at once with one sentence that says what is
// needed, and exits 3 as every command does that lacks the privilege to
// look (not 1, a failure, nor 2, a usage error).
func TestTraceWithoutRoot(t *testing.T) {
	testenv.RequireRoot(t) // to be able to drop to nobody
	cmd := exec.Command(eaddrBin, "trace")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitNoPrivilege {
		t.Fatalf("exit %v, want status 3; output %q", err, out)
	}
	if !strings.Contains(string(out), "root (or CAP_BPF and CAP_PERFMON) is needed") {
		t.Errorf("output %q does not say root is needed", out)
	}
}

// cClients builds testdata/clients/connect.c twice, with gcc (glibc) and
// musl-gcc -static (musl): the same program, two wordings of one errno.
func cClients(t *testing.T, host string, port int) []client {
	t.Helper()
	dir := t.TempDir()
	var out []client
	for _, b := range []struct {
		name, cc, pkg, libc string
		flags               []string
	}{
		{"C on glibc", "gcc", "gcc", "glibc", nil},
		{"C on musl", "musl-gcc", "musl-tools", "musl", []string{"-static"}},
	} {
		bin := testenv.CompileC(t, b.cc, b.pkg, filepath.Join(dir, "connect-"+b.libc), "../../testdata/clients/connect.c", b.flags...)
		out = append(out, client{Name: b.name, Argv: []string{bin, host, strconv.Itoa(port)}, Comm: commOf(bin),
			Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, libc: b.libc, unknown: true})
	}
	return out
}

// checkPrediction: the line eaddr predicts for the event is a line the
// client really printed (a template's <...> parts match anything), and the
// binary was classified right. A client eaddr has no wording for must say
// "unknown" and give an errno text the client really printed.
func checkPrediction(t *testing.T, cl client, ev jsonEvent, printed string) {
	t.Helper()
	if ev.Explain == nil {
		t.Errorf("event has no explain object")
		return
	}
	x := ev.Explain
	if x.Meaning == "" {
		t.Errorf("explain lacks the meaning: %+v", x)
	}
	if cl.libc != "" && x.Libc != cl.libc {
		t.Errorf("libc %q, want %q", x.Libc, cl.libc)
	}
	t.Logf("%s: eaddr predicted %q (%s, %s, %s), grep %q", cl.Name, x.ClientMessage, x.Client, x.Confidence, x.Libc, x.Grep)
	if cl.unknown {
		if x.Client != "unknown" || x.ClientMessage != "" || x.ClientUnknown == "" {
			t.Errorf("%s: want client \"unknown\" with a reason and no line, got %+v", cl.Name, x)
		}
		for _, g := range x.Grep {
			if strings.Contains(printed, g) {
				return
			}
		}
		t.Errorf("%s printed\n%s\nwhich has none of eaddr's grep texts %q", cl.Name, printed, x.Grep)
		return
	}
	for _, line := range strings.Split(printed, "\n") {
		if x.ClientMessage != "" && judgeWording(x.ClientMessage, line) == "exact" {
			return
		}
	}
	t.Errorf("%s (%s, %s) printed\n%s\neaddr predicted\n%s", cl.Name, x.Client, x.Libc, printed, x.ClientMessage)
}

// A client that exits right after its failure is still classified: the
// tracer is stopped (SIGSTOP) while curl fails, exits and is reaped, so
// eaddr reads the event only when /proc/PID is gone.
func TestClassifiedAfterExit(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	curl := testenv.Program(t, "curl", "curl")
	p := startTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10))
	resume := p.pause(t) // every thread stopped before curl starts
	pid, out := runInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Fatalf("curl (pid %d) still exists", pid)
	}
	resume()
	evs := p.forPID(pid, 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events for curl, want 1", len(evs))
	}
	x := evs[0].Explain
	if x == nil || x.Runtime != "c" || x.Libc != "glibc" || x.Client != "curl" {
		t.Fatalf("curl that had exited was classified as %+v", x)
	}
	checkPrediction(t, client{Name: "curl"}, evs[0], out)
}

// --nodeport-collisions reports a connect() whose source port the kernel
// took from the NodePort range; without the flag nothing is reported.
func TestNodePortCollisions(t *testing.T) {
	testenv.RequireRoot(t)
	py := python(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	// The scratch netns plays a host whose range was widened into 30000-32767.
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "31000 31001"); err != nil {
		t.Fatal(err)
	}
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	inode := strconv.FormatUint(ns.Inode(), 10)
	on := startTrace(t, "--nodeport-collisions", "--nodeport-netns", inode)
	// The same netns without --nodeport-collisions: the check is off.
	off := startTrace(t, "--errno", "all", "--nodeport-netns", inode)
	pid, out := runInNS(t, ns, py, "-c", `import socket
s = socket.create_connection(("127.0.0.1", 8080), timeout=5)
print(s.getsockname()[1])
`)
	port, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || port < 31000 || port > 31001 {
		t.Fatalf("python's source port %q is not in 31000-31001", out)
	}
	evs := on.forPID(pid, 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events with --nodeport-collisions, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Kind != "nodeport_collision" || ev.Syscall != "connect" || ev.Errno != "" || ev.Local == nil || ev.Local.Port != port ||
		ev.Remote == nil || ev.Remote.Port != 8080 || ev.NetNS != ns.Inode() {
		t.Errorf("collision event %+v local %+v remote %+v", ev, ev.Local, ev.Remote)
	}
	// The refused connect after python's is off's sentinel: its connect
	// program was listening, and python's event would have come first.
	off.sentinel(t, "connect")
	if evs := off.forPID(pid, 1, 0); len(evs) != 0 {
		t.Errorf("without the flag: %+v", evs)
	}
}

// sentinel makes this test process fail one syscall in the host netns and
// waits up to 5s for the trace to report it: "bind" fails bind() with
// EADDRNOTAVAIL (192.0.2.1, on no interface, at a random port), "connect"
// fails a blocking connect() with ECONNREFUSED (a loopback port nothing
// listens on; reported only with --errno all). The pipeline writes
// events in the ring's order, so once the sentinel's event is out every
// event of an earlier failure is too: a "nothing arrived" check after it
// means nothing, not "not yet". Fails the test if the sentinel is not seen
// within 30 s: a liveness bound, not a latency one (its binary's analysis
// and its diagnosis each wait up to their bound, longer on a busy node).
func (p *traceProc) sentinel(t *testing.T, kind string) {
	t.Helper()
	self := os.Getpid()
	n := len(p.forPID(self, 0, 0))
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
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: closedPort(t), Addr: [4]byte{127, 0, 0, 1}})
	default:
		t.Fatalf("sentinel %q: not bind or connect", kind)
	}
	if !errors.Is(err, want) {
		t.Fatalf("sentinel %s: %v, want %v", kind, err, want)
	}
	evs := p.forPID(self, n+1, 30*time.Second)
	if len(evs) <= n {
		t.Fatalf("the sentinel %s (%v) was not reported within 30s: the trace was not listening", kind, want)
	}
	if ev := evs[n]; ev.Syscall != kind || ev.ErrnoNum != int(want) {
		t.Fatalf("sentinel event %s %s, want %s %v", ev.Syscall, ev.Errno, kind, want)
	}
}

// closedPort returns a loopback TCP port of the host netns that nothing
// listens on: it was bound and released again.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// --explain short, the default, keeps the event small for log pipelines;
// --explain full adds how every other client words the failure.
func TestExplainLevels(t *testing.T) {
	ns := exhausted(t, "tcp4", "127.0.0.1")
	inode := strconv.FormatUint(ns.Inode(), 10)
	short := startTrace(t, "--netns", inode)
	full := startTrace(t, "--netns", inode, "--explain", "full")
	pid := failConnect(t, ns, "127.0.0.1")
	s, f := short.forPID(pid, 1, 5*time.Second), full.forPID(pid, 1, 5*time.Second)
	if len(s) != 1 || len(f) != 1 || s[0].Explain == nil || f[0].Explain == nil {
		t.Fatalf("events: default %+v, full %+v", s, f)
	}
	if n := len(s[0].Explain.OtherWordings); n != 0 {
		t.Errorf("the default event lists %d other wordings, want none", n)
	}
	if n := len(f[0].Explain.OtherWordings); n < 10 {
		t.Errorf("--explain full lists %d other wordings, want at least 10", n)
	}
	sl, fl := len(short.lineFor(s[0])), len(full.lineFor(f[0]))
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
	ns := exhausted(t, "tcp4", "127.0.0.1")
	py := python(t)
	// The two probes come microseconds apart, within the default 50 ms on a
	// quiet machine; --retry-window 10s keeps a busy one from making them
	// two attempts (the window itself: explain.TestAttempts).
	p := startTrace(t, "--errno", "all", "--netns", strconv.FormatUint(ns.Inode(), 10), "--retry-window", "10s")
	script := `import socket, pwd
pwd.getpwnam("root")   # glibc: nscd first
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/run/eaddr-test-no-such.sock")
except OSError as e:
    print(e)
`
	pid, out := runInNS(t, ns, py, "-c", script)
	evs := p.forPID(pid, 3, 5*time.Second)
	var nscd, other []jsonEvent
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
