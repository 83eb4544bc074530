package diagnose

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

func TestDiagnosisStrings(t *testing.T) {
	c := sortedCounts(map[string]int{"TIME_WAIT": 3, "ESTABLISHED": 5, "CLOSE": 3})
	if got := countsString(c); got != "5 ESTABLISHED, 3 CLOSE, 3 TIME_WAIT" {
		t.Errorf("counts %q", got)
	}
	if got := countsString(nil); got != "no sockets" {
		t.Errorf("no counts %q", got)
	}
	if got := holdersString([]Holder{{PID: 812, Comm: "python3", Sockets: 2}, {PID: 9, Comm: "java"}}); got != ", held by pid 812 python3, pid 9 java" {
		t.Errorf("holders %q", got)
	}
	if got := netdiag.FormatSpans([]netdiag.PortSpan{{Lo: 30000, Hi: 32767}, {Lo: 8080, Hi: 8080}}); got != "30000-32767,8080" {
		t.Errorf("spans %q", got)
	}
}

// The Diagnoser takes a snapshot per call (sharing one among the events of
// an interval is the trace's diagnosis stage's, its one cache); a netns with
// no live process is reported as unreachable; what it has nothing to say
// about gets no diagnosis.
func TestDiagnoserSnapshotPerCall(t *testing.T) {
	d := NewDiagnoser()
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	dst := netip.MustParseAddrPort("10.96.0.10:80")
	ev := &decode.Event{Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, NetNS: 1, PID: 1 << 30, PPID: 1 << 30,
		Remote: decode.Addr{Valid: true, Family: decode.AFInet, IP: dst}}
	for range 3 {
		g := d.Diagnose(ev)
		if g == nil || !strings.HasPrefix(g.Verdict, "no diagnosis") || g.Shared {
			t.Fatalf("unreachable netns: %+v", g)
		}
	}
	if d.Unreachable != 3 || d.Snapshots != 0 {
		t.Errorf("unreachable %d snapshots %d, want 3, 0", d.Unreachable, d.Snapshots)
	}
	if g := d.Diagnose(&decode.Event{Syscall: decode.Connect, Errno: 111}); g != nil {
		t.Errorf("ECONNREFUSED diagnosed: %+v", g)
	}
}

// unixScene is a netns where a python3 process holds a listening unix
// stream socket (live.sock), a datagram socket (dgram.sock) and an abstract
// listener, left a stale socket file (stale.sock: bound, closed, not
// unlinked), and made the failing calls, whose errnos it reports.
type unixScene struct {
	ns       *netns.NS
	pid      int // the python3 process: holder of the sockets and the failing process
	dir      string
	abstract string // "@name\x00x"
	errnos   map[string]int
}

func newUnixScene(t *testing.T) *unixScene {
	t.Helper()
	ns := testns.New(t)
	s := &unixScene{ns: ns, dir: t.TempDir(), abstract: fmt.Sprintf("@eaddr-test-%d\x00x", time.Now().UnixNano())}
	py := `import socket, sys, json, time
d, ab = sys.argv[1], b"\0" + sys.argv[2][1:].encode() + b"\0x"
U = socket.AF_UNIX
keep = []
def sock(t=socket.SOCK_STREAM):
    s = socket.socket(U, t); keep.append(s); return s
l = sock(); l.bind(d + "/live.sock"); l.listen()
s = socket.socket(U); s.bind(d + "/stale.sock"); s.close()
a = sock(); a.bind(ab); a.listen()
g = sock(socket.SOCK_DGRAM); g.bind(d + "/dgram.sock")
out = {}
for name, f in [("bind-live", lambda: sock().bind(d + "/live.sock")),
                ("bind-stale", lambda: sock().bind(d + "/stale.sock")),
                ("bind-relative", lambda: sock().bind("live.sock")),
                ("bind-abstract", lambda: sock().bind(ab)),
                ("bind-dgram", lambda: sock(socket.SOCK_DGRAM).bind(d + "/dgram.sock")),
                ("connect-stale", lambda: sock().connect(d + "/stale.sock")),
                ("connect-missing", lambda: sock().connect(d + "/missing.sock"))]:
    try:
        f(); out[name] = 0
    except OSError as e:
        out[name] = e.errno
print(json.dumps(out), flush=True)
time.sleep(600)
`
	// An abstract name with a NUL inside, as /proc/net/unix shows as '@'.
	cmd := exec.Command(testenv.Program(t, "python3", "python3"), "-c", py, s.dir, strings.TrimSuffix(s.abstract, "\x00x"))
	cmd.Stderr, cmd.Dir = os.Stderr, s.dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(cmd); err != nil {
		testenv.Skip(t, fmt.Sprintf("python3 in a netns: %v", err))
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &s.errnos); err != nil {
			t.Fatalf("python3 printed %q: %v", l, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("python3 did not report within 10s")
	}
	s.pid = cmd.Process.Pid
	return s
}

// event is the failure named c as the tracer reports it: the errno the
// real call returned, the python3 process, its netns and mount namespace.
func (s *unixScene) event(t *testing.T, c string) *decode.Event {
	t.Helper()
	sys, path, typ := decode.Bind, "", uint16(unix.SOCK_STREAM)
	verb, what, _ := strings.Cut(c, "-")
	if verb == "connect" {
		sys = decode.Connect
	}
	switch what {
	case "abstract":
		path = s.abstract
	case "dgram":
		path, typ = s.dir+"/dgram.sock", unix.SOCK_DGRAM
	case "relative":
		path = "live.sock" // the process's cwd is s.dir
	default:
		path = s.dir + "/" + what + ".sock"
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", s.pid), &st); err != nil {
		t.Fatal(err)
	}
	a := decode.Addr{Valid: true, Family: decode.AFUnix, Path: []byte(path)}
	ev := &decode.Event{Syscall: sys, Errno: s.errnos[c], PID: uint32(s.pid), PPID: uint32(os.Getpid()), NetNS: uint32(s.ns.Inode()),
		MntNS: uint32(st.Ino), HasSocket: true, Family: decode.AFUnix, Type: typ}
	if sys == decode.Bind {
		ev.Local = a
	} else {
		ev.Remote = a
	}
	return ev
}

// Unix-domain failures, on real sockets: a live listener, a stale socket
// file, an abstract name, a datagram socket, ECONNREFUSED on the stale
// file and ENOENT each get a diagnosis about the file or name and its
// holder, never about ports; two paths of one netns in one interval get
// two snapshots. With sock_diag unusable, /proc/net/unix gives the same.
// patientDiagnoser is a Diagnoser whose searches (the holders of the sockets,
// the other netns for a unix socket file) have a minute: with the default
// 300 ms each, what a search finds on a busy machine or under emulation is
// the machine's, not eaddr's. The budgets themselves: TestDiagnoseUnixOtherNetns
// (ElsewhereWait 0) and netdiag's TestHolders.
func patientDiagnoser() *Diagnoser {
	d := NewDiagnoser()
	d.HoldersWait, d.ElsewhereWait = time.Minute, time.Minute
	return d
}

func TestDiagnoseUnix(t *testing.T) {
	s := newUnixScene(t)
	want := map[string]int{"bind-live": 98, "bind-relative": 98, "bind-stale": 98, "bind-abstract": 98, "bind-dgram": 98, "connect-stale": 111, "connect-missing": 2}
	if !maps.Equal(s.errnos, want) {
		t.Fatalf("the real calls failed with %v, want %v", s.errnos, want)
	}
	holder := fmt.Sprintf("held by pid %d python3", s.pid)
	cases := []struct{ c, verdict, fix string }{
		{"bind-live", "the socket file " + s.dir + "/live.sock is in use (1 LISTEN, " + holder + ")", fmt.Sprintf("stop the process that holds it: pid %d (python3)", s.pid)},
		{"bind-relative", "the socket file live.sock is in use (1 LISTEN, " + holder + ")", fmt.Sprintf("stop the process that holds it: pid %d (python3)", s.pid)},
		{"bind-stale", "stale socket file " + s.dir + "/stale.sock: it exists but no socket of any network namespace with a live process is bound to it", "remove the stale socket file " + s.dir + "/stale.sock"},
		{"bind-abstract", "the abstract unix socket name " + s.abstract + " is taken (1 LISTEN, " + holder + ")", fmt.Sprintf("stop the process that holds it: pid %d (python3)", s.pid)},
		{"bind-dgram", "the socket file " + s.dir + "/dgram.sock is in use (1 UNCONNECTED, " + holder + ")", fmt.Sprintf("pid %d (python3)", s.pid)},
		{"connect-stale", "stale socket file " + s.dir + "/stale.sock: nobody listens on it", "remove the stale socket file " + s.dir + "/stale.sock"},
		{"connect-missing", "no such socket file " + s.dir + "/missing.sock: the server is not running", "start the server"},
	}
	for _, fallback := range []bool{false, true} {
		netdiag.TestingNoSockDiag.Store(fallback)
		t.Cleanup(func() { netdiag.TestingNoSockDiag.Store(false) })
		d := patientDiagnoser()
		for _, tc := range cases {
			g := d.Diagnose(s.event(t, tc.c))
			if g == nil {
				t.Errorf("%s (fallback %v): no diagnosis", tc.c, fallback)
				continue
			}
			fix := strings.Join(g.Fix, " | ")
			if !strings.HasPrefix(g.Verdict, tc.verdict) || !strings.Contains(fix, tc.fix) {
				t.Errorf("%s (fallback %v):\n verdict %q\n     fix %q\nwant verdict %q... and fix with %q", tc.c, fallback, g.Verdict, fix, tc.verdict, tc.fix)
			}
			if strings.HasSuffix(tc.c, "-stale") && strings.Contains(g.Verdict, "without unix_diag") != fallback {
				t.Errorf("%s (fallback %v): the match by name is not (only) said when it was used: %q", tc.c, fallback, g.Verdict)
			}
			if g.RangeHi != 0 || g.Shared || strings.Contains(g.Verdict+fix, "port") || strings.Contains(fix, "tcp_tw_reuse") {
				t.Errorf("%s (fallback %v): port words or a shared snapshot in a unix diagnosis: %+v", tc.c, fallback, g)
			}
		}
		// Seven failures, seven names or errnos: seven snapshots.
		if d.Snapshots != 7 {
			t.Errorf("fallback %v: %d snapshots, want 7", fallback, d.Snapshots)
		}
	}
}

// Without sock_diag (as on a kernel whose inet_diag modules cannot be
// loaded) the diagnosis reads /proc/net and gives the same verdict, counts
// and holders as with it, on the same real sockets.
func TestDiagnoseProcNetFallback(t *testing.T) {
	ns := rangedNS(t, 40000, 40001)
	ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	sleep := exec.Command("sleep", "600")
	if err := ns.Start(sleep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	dst := netip.MustParseAddrPort("127.0.0.1:8080")
	connect := &decode.Event{Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, NetNS: uint32(ns.Inode()), PID: uint32(sleep.Process.Pid),
		Remote: decode.Addr{Valid: true, Family: decode.AFInet, IP: dst}}
	bind := &decode.Event{Syscall: decode.Bind, Errno: decode.EADDRINUSE, NetNS: uint32(ns.Inode()), PID: uint32(sleep.Process.Pid),
		Local: decode.Addr{Valid: true, Family: decode.AFInet, IP: dst}}
	for _, ev := range []*decode.Event{connect, bind} {
		netlink := patientDiagnoser().Diagnose(ev)
		netdiag.TestingNoSockDiag.Store(true)
		t.Cleanup(func() { netdiag.TestingNoSockDiag.Store(false) })
		proc := patientDiagnoser().Diagnose(ev)
		netdiag.TestingNoSockDiag.Store(false)
		t.Logf("%s: %s", ev.Syscall, netlink.Verdict)
		if netlink.Err != "" || proc.Verdict != netlink.Verdict || proc.InUse != netlink.InUse ||
			!slices.Equal(proc.States, netlink.States) || !slices.Equal(proc.Holders, netlink.Holders) {
			t.Errorf("%s: /proc/net fallback differs from sock_diag:\nnetlink %+v\n   proc %+v", ev.Syscall, netlink, proc)
		}
		if len(netlink.Holders) == 0 || netlink.Holders[0].PID != os.Getpid() {
			t.Errorf("%s: holders %+v, want this test process", ev.Syscall, netlink.Holders)
		}
	}
	if g := patientDiagnoser().Diagnose(connect); g.InUse != 2 || !g.Exhausted || g.Cause != CausePerDestination || !strings.HasPrefix(g.Verdict, "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 2 ports") {
		t.Errorf("connect: %+v", g)
	}
}

// BenchmarkDiagnoseUnix is one unix diagnosis snapshot (stat of the file,
// unix dump, holder scan) in a netns with about 2000 other bound unix
// sockets, with sock_diag and with the /proc/net/unix fallback.
func BenchmarkDiagnoseUnix(b *testing.B) {
	ns := testns.New(b)
	dir := b.TempDir()
	cmd := exec.Command("python3", "-c", `import socket, resource, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (2100, 2100))
d = sys.argv[1]
keep = []
for i in range(2000):
    s = socket.socket(socket.AF_UNIX)
    s.bind(d + "/s%d.sock" % i if i % 2 else b"\0eaddr-bench-%d" % i)
    if i % 10 == 0:
        s.listen()
    keep.append(s)
socket.socket(socket.AF_UNIX).bind(d + "/stale.sock")
print("ready", flush=True)
time.sleep(600)
`, dir)
	out, _ := cmd.StdoutPipe()
	if err := ns.Start(cmd); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		b.Fatalf("python3 printed %q", l)
	}
	var st unix.Stat_t
	unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid), &st)
	b.Cleanup(func() { netdiag.TestingNoSockDiag.Store(false) })
	// live: a listener of the netns holds the file; stale: nothing does, so
	// every other netns of the machine is searched too.
	for _, file := range []string{"s11.sock", "stale.sock"} {
		ev := &decode.Event{Syscall: decode.Bind, Errno: decode.EADDRINUSE, PID: uint32(cmd.Process.Pid), NetNS: uint32(ns.Inode()), MntNS: uint32(st.Ino),
			HasSocket: true, Family: decode.AFUnix, Local: decode.Addr{Valid: true, Family: decode.AFUnix, Path: []byte(dir + "/" + file)}}
		for _, mode := range []string{"netlink", "procnet"} {
			b.Run(strings.TrimSuffix(file, ".sock")+"/"+mode, func(b *testing.B) {
				netdiag.TestingNoSockDiag.Store(mode == "procnet")
				d := NewDiagnoser()
				d.ElsewhereWait = time.Minute
				for b.Loop() {
					if g := d.Diagnose(ev); (len(g.Holders) == 1) != (file == "s11.sock") {
						b.Fatalf("%+v", g)
					}
				}
			})
		}
	}
}

// A socket file bound from another netns is in use, not stale: the other
// netns are searched and the verdict names it and the holder. Without time
// to search them all, a file nobody seems to hold is only "probably" stale.
func TestDiagnoseUnixOtherNetns(t *testing.T) {
	s := newUnixScene(t) // netns A: holds live.sock
	b := testns.New(t)
	sleep := exec.Command("sleep", "600")
	if err := b.Start(sleep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	probe := exec.Command("python3", "-c", `import socket, sys
try:
    socket.socket(socket.AF_UNIX).bind(sys.argv[1])
except OSError as e:
    print(e.errno)
`, s.dir+"/live.sock")
	var out strings.Builder
	probe.Stdout = &out
	if err := b.Start(probe); err != nil {
		t.Fatal(err)
	}
	if err := probe.Wait(); err != nil || out.String() != "98\n" {
		t.Fatalf("bind from netns B: %q %v", out.String(), err)
	}
	for _, fallback := range []bool{false, true} {
		netdiag.TestingNoSockDiag.Store(fallback)
		t.Cleanup(func() { netdiag.TestingNoSockDiag.Store(false) })
		ev := s.event(t, "bind-live")
		ev.PID, ev.NetNS = uint32(sleep.Process.Pid), uint32(b.Inode())
		g := patientDiagnoser().Diagnose(ev)
		want := fmt.Sprintf("the socket file %s/live.sock is in use by a socket of another network namespace (%d) (1 LISTEN, held by pid %d python3)", s.dir, s.ns.Inode(), s.pid)
		if g.Verdict != want || len(g.Holders) != 1 || g.Holders[0].PID != s.pid {
			t.Errorf("fallback %v: verdict %q, holders %+v; want %q", fallback, g.Verdict, g.Holders, want)
		}
	}
	netdiag.TestingNoSockDiag.Store(false)
	d := NewDiagnoser()
	d.ElsewhereWait = 0
	g := d.Diagnose(s.event(t, "bind-stale"))
	if !strings.HasPrefix(g.Verdict, "probably a stale socket file "+s.dir+"/stale.sock: it exists but no socket of this network namespace, nor of 0 of the ") ||
		!strings.Contains(strings.Join(g.Fix, " "), "if no server uses it, remove the stale socket file") {
		t.Errorf("stale without time to search: %q, fix %q", g.Verdict, g.Fix)
	}
}
