package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// diagTrace traces ns with a diagnosis wait no machine here outlasts: the
// 300 ms an event waits for its snapshot by default (and the holders search
// within it) is a bound of eaddr's design, tested on a clock the test moves
// (pipeline.TestDiagnoseWait); what these tests check is the diagnosis, which
// must not depend on how busy the machine is.
func diagTrace(t *testing.T, ns *netns.NS, args ...string) *eaddrtest.TraceProc {
	t.Helper()
	return eaddrtest.StartTrace(t, append([]string{"--netns", strconv.FormatUint(ns.Inode(), 10), "--diagnose-wait", "1m"}, args...)...)
}

// diagDeadline is how long a diagnosis test waits for its event: generous,
// as the event waits for its snapshot however long that takes.
const diagDeadline = 90 * time.Second

// Exhaustion held by ESTABLISHED connections: the verdict's counts are what
// ss reports in that netns, and the holder is the process with the sockets.
func TestDiagnoseEstablished(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	// Without a process left in the netns, a snapshot taken after the client
	// exited finds nothing to enter (TestDiagnoseAfterExit covers that).
	eaddrtest.Sandbox(t, ns)
	p := diagTrace(t, ns)
	pid := eaddrtest.FailConnect(t, ns, "127.0.0.1")
	evs := p.ForPID(pid, 1, diagDeadline)
	if len(evs) != 1 || evs[0].Diagnosis == nil {
		t.Fatalf("want one event with a diagnosis, got %+v", evs)
	}
	g := evs[0].Diagnosis
	ss := eaddrtest.SsCount(t, ns, "established", "127.0.0.1:8080", 40000, 40001)
	if ss != 2 || g.InUse != ss || g.States["ESTABLISHED"] != ss || g.Usable != 2 || g.PortRange != "40000-40001" ||
		g.Cause != "per_destination" || !g.Exhausted || g.Free != 0 || g.SocketsFrom != "iterator" {
		t.Errorf("diagnosis %+v; ss counts %d ESTABLISHED", g, ss)
	}
	want := "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 2 ports of 40000-40001 is free: 2 held by open connections, held by pid " + strconv.Itoa(os.Getpid())
	if !strings.HasPrefix(g.Verdict, want) {
		t.Errorf("verdict %q, want it to start with %q", g.Verdict, want)
	}
	if len(g.Holders) != 1 || g.Holders[0].PID != os.Getpid() || g.Holders[0].Sockets != 2 {
		t.Errorf("holders %+v, want this test process with 2 sockets (verdict %q)", g.Holders, g.Verdict)
	}
	// The netns is no pod's, and it listens on 8080: the wider range is set
	// from inside it and starts above 8080 (diagnose.TestRangeFixesApplied
	// applies such a fix and asks the kernel).
	fix := strings.Join(g.Fix, " | ")
	if !strings.Contains(fix, `widen this network namespace's range (it is no pod's): nsenter -t `) ||
		!strings.Contains(fix, ` -n sysctl -w net.ipv4.ip_local_port_range="8082 65535" gives 57454 ports (now 2)`) || strings.Contains(fix, "securityContext") {
		t.Errorf("fix %q: want this netns's range widened from inside it, clear of its listener on 8080", g.Fix)
	}
}

// Exhaustion held by TIME_WAIT sockets (the client closed first, and
// tcp_tw_reuse is off): the verdict counts TIME_WAIT as ss does.
func TestDiagnoseTimeWait(t *testing.T) {
	ns := testns.New(t)
	for k, v := range map[string]string{"net.ipv4.ip_local_port_range": "40000 40001", "net.ipv4.tcp_tw_reuse": "0"} {
		if err := ns.SetSysctl(k, v); err != nil {
			t.Fatal(err)
		}
	}
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 2 {
		c, err := ns.Dial("tcp4", "127.0.0.1:8080")
		if err != nil {
			t.Fatal(err)
		}
		var s net.Conn
		select {
		case s = <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener accepted nothing within 10s")
		}
		c.Close() // the client closes first: its side goes to TIME_WAIT
		time.Sleep(20 * time.Millisecond)
		s.Close()
	}
	time.Sleep(100 * time.Millisecond)
	eaddrtest.Sandbox(t, ns)
	p := diagTrace(t, ns)
	pid := eaddrtest.FailConnect(t, ns, "127.0.0.1")
	evs := p.ForPID(pid, 1, diagDeadline)
	if len(evs) != 1 || evs[0].Diagnosis == nil {
		t.Fatalf("want one event with a diagnosis, got %+v", evs)
	}
	g := evs[0].Diagnosis
	ss := eaddrtest.SsCount(t, ns, "time-wait", "127.0.0.1:8080", 40000, 40001)
	if ss != 2 || g.InUse != 2 || g.States["TIME_WAIT"] != ss {
		t.Errorf("diagnosis %+v; ss counts %d TIME_WAIT", g, ss)
	}
	if g.Cause != "time_wait" || !strings.Contains(g.Verdict, "none of the 2 ports of 40000-40001 is free: 2 in TIME_WAIT that connect() may not reuse") {
		t.Errorf("verdict %q", g.Verdict)
	}
	if !strings.Contains(strings.Join(g.Fix, " "), "net.ipv4.tcp_tw_reuse=1 in this netns (now 0)") {
		t.Errorf("fix %q lacks tcp_tw_reuse=1 for this netns's 0", g.Fix)
	}
}

// A client that exited before the diagnosis ran still gets it: the netns is
// reached through another process in it (the sandbox).
func TestDiagnoseAfterExit(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	sb := eaddrtest.Sandbox(t, ns)
	p := diagTrace(t, ns)
	resume := p.Pause(t)
	pid := eaddrtest.FailConnect(t, ns, "127.0.0.1")
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Fatalf("client %d still exists", pid)
	}
	resume()
	evs := p.ForPID(pid, 1, diagDeadline)
	if len(evs) != 1 || evs[0].Diagnosis == nil || !strings.HasPrefix(evs[0].Diagnosis.Verdict, "ephemeral ports exhausted") {
		t.Fatalf("exited client (sandbox pid %d): %+v", sb, evs)
	}
}

// bind EADDRINUSE names the listener's process; bind to an address that is
// not local lists the addresses the netns has.
func TestDiagnoseBind(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	py := eaddrtest.Python(t)
	listener := exec.Command(py, "-c", `import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 9090))
s.listen()
print("ready", flush=True)
time.sleep(600)
`)
	out, _ := listener.StdoutPipe()
	if err := ns.Start(listener); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Process.Kill(); listener.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf[:5]) != "ready" {
		t.Fatalf("listener did not start: %q %v", buf, err)
	}
	p := diagTrace(t, ns)
	for _, tc := range []struct {
		ip   string
		port int
	}{{"127.0.0.1", 9090}, {"192.0.2.1", 4242}} {
		pid, _ := eaddrtest.RunInNS(t, ns, py, "-c", fmt.Sprintf(`import socket
try:
    socket.socket().bind((%q, %d))
except OSError as e:
    print(e)
`, tc.ip, tc.port))
		evs := p.ForPID(pid, 1, diagDeadline)
		if len(evs) != 1 || evs[0].Diagnosis == nil {
			t.Fatalf("bind %s:%d: %+v", tc.ip, tc.port, evs)
		}
		g := evs[0].Diagnosis
		if tc.port == 9090 {
			if len(g.Holders) != 1 || g.Holders[0].PID != listener.Process.Pid || g.Holders[0].Comm != "python3" || g.States["LISTEN"] != 1 {
				t.Errorf("EADDRINUSE: %+v, want the listener pid %d python3", g, listener.Process.Pid)
			}
			if !strings.Contains(g.Verdict, fmt.Sprintf("held by pid %d python3", listener.Process.Pid)) {
				t.Errorf("verdict %q", g.Verdict)
			}
			continue
		}
		addrs := strings.Join(g.Addresses, " ")
		if !strings.Contains(addrs, "127.0.0.1/8") || !strings.Contains(addrs, "::1/128") || !strings.Contains(g.Verdict, "192.0.2.1 is not configured") {
			t.Errorf("EADDRNOTAVAIL: %+v", g)
		}
	}
}

// A storm of 50,000 failures toward one destination makes a handful of
// netns snapshots, at most one per --diagnose-interval by eaddr's own clock
// (their snapshot_time), and every event is either written or counted as
// lost; none goes out without its diagnosis.
func TestDiagnoseStorm(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	// The pod's pause process: the netns stays reachable after the client
	// exits, however far behind a busy machine leaves the reader (without
	// it, a snapshot due after python's exit found the netns gone).
	eaddrtest.Sandbox(t, ns)
	py := eaddrtest.Python(t)
	// --rate-limit 0: every event reaches the diagnoser, which must still
	// take only a handful of snapshots.
	p := diagTrace(t, ns, "--explain", "off", "--rate-limit", "0")
	p.LossOK = true // zero loss at this rate is the performance work's target, not this test's
	start := time.Now()
	eaddrtest.RunLong(t, ns, py, "-c", `import socket
for i in range(50000):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", 8080))
    except OSError:
        pass
    s.close()
`)
	took := time.Since(start)
	c := p.Stop(t)
	events, lost, snaps, shared, unreachable := c["events"], c["lost"], c["netns_snapshots"], c["snapshots_shared"], c["netns_unreachable"]
	t.Logf("50000 failures in %v: %d events read, %d lost in the kernel, %d snapshots, %d shared, %d unreachable", took.Round(time.Millisecond), events, lost, snaps, shared, unreachable)
	if events+lost != 50000 {
		t.Errorf("events %d + lost %d != 50000: a loss went uncounted", events, lost)
	}
	// Every event got a snapshot, shared one, found its netns gone, or went
	// out before its snapshot was ready (late) or could be asked (skipped):
	// with a diagnosis wait of a minute, none is late.
	late, skipped := c["diagnoses_late"], c["diagnoses_skipped"]
	if snaps+shared+unreachable+late+skipped != events {
		t.Errorf("snapshots %d + shared %d + unreachable %d + late %d + skipped %d != events %d", snaps, shared, unreachable, late, skipped, events)
	}
	if late+skipped != 0 || unreachable != 0 {
		t.Errorf("%d late, %d skipped, %d unreachable of %d events: a storm must share snapshots, not miss them", late, skipped, unreachable, events)
	}
	times := snapshotTimes(t, p)
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < time.Second {
			t.Errorf("snapshots %d and %d of one destination %v apart: more than one per --diagnose-interval (1s)", i, i+1, d)
		}
	}
	if snaps < len(times) || snaps > len(times)+c["dropped"] {
		t.Errorf("%d snapshots in the totals, %d distinct snapshot_time in the %d events read (%d dropped)", snaps, len(times), len(p.Events), c["dropped"])
	}
}

// snapshotTimes is the distinct diagnosis.snapshot_time of the events
// read, in order.
func snapshotTimes(t *testing.T, p *eaddrtest.TraceProc) []time.Time {
	t.Helper()
	p.Mu.Lock()
	defer p.Mu.Unlock()
	seen := map[string]bool{}
	var times []time.Time
	for _, ev := range p.Events {
		if ev.Diagnosis == nil || ev.Diagnosis.Snapshot == "" || seen[ev.Diagnosis.Snapshot] {
			continue
		}
		seen[ev.Diagnosis.Snapshot] = true
		at, err := time.Parse(time.RFC3339Nano, ev.Diagnosis.Snapshot)
		if err != nil {
			t.Fatalf("snapshot_time %q: %v", ev.Diagnosis.Snapshot, err)
		}
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times
}

// eaddr check flags a host netns whose range overlaps the NodePort range,
// clears it when ip_local_reserved_ports covers the overlap, calls a netns
// at 100% use critical, and exits 0, 1 or 2 as documented.
func TestCheck(t *testing.T) {
	ns := testns.New(t)
	eaddrtest.Sandbox(t, ns)
	inode := strconv.FormatUint(ns.Inode(), 10)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "31000 40001"); err != nil {
		t.Fatal(err)
	}
	rep, code := eaddrtest.RunCheckJSON(t, "--netns", inode, "--host-netns", inode)
	if code != 1 || len(rep.NetNS) != 1 || !eaddrtest.HasFinding(rep.NetNS[0], diagnose.SevWarning, "overlaps the NodePort range 30000-32767 in 1768 unreserved ports") {
		t.Fatalf("overlap not flagged (exit %d): %+v", code, rep)
	}
	// The same range in a pod's netns is only information.
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", inode)
	if code != 0 || !eaddrtest.HasFinding(rep.NetNS[0], diagnose.SevInfo, "overlaps the NodePort range") {
		t.Errorf("overlap outside the host netns: exit %d %+v", code, rep)
	}
	if err := ns.SetSysctl("net.ipv4.ip_local_reserved_ports", "30000-32767"); err != nil {
		t.Fatal(err)
	}
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", inode, "--host-netns", inode)
	if code != 0 || eaddrtest.HasFinding(rep.NetNS[0], diagnose.SevWarning, "NodePort") || rep.NetNS[0].Usable != 40001-32768+1 {
		t.Errorf("reserved ports did not clear the flag (exit %d): %+v", code, rep)
	}
	// 100% of a two-port range held toward one destination.
	full := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	eaddrtest.Sandbox(t, full)
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", strconv.FormatUint(full.Inode(), 10))
	r := rep.NetNS[0]
	if code != 1 || r.Worst != diagnose.SevCritical || len(r.Destinations) == 0 || r.Destinations[0].Remote != "127.0.0.1:8080" || r.Destinations[0].Percent != 100 {
		t.Errorf("exhausted netns not critical (exit %d): %+v", code, rep)
	}
	out, _, code := eaddrtest.Run(t, context.Background(), "check", "--netns", strconv.FormatUint(full.Inode(), 10))
	if code != 1 || !strings.Contains(out, "CRITICAL") || !strings.Contains(out, "toward 127.0.0.1:8080") {
		t.Errorf("table output (exit %d):\n%s", code, out)
	}
	if _, errOut, code := eaddrtest.Run(t, context.Background(), "check", "--warn", "95", "--crit", "90"); code != 2 || !strings.Contains(errOut, "--warn") {
		t.Errorf("bad thresholds: exit %d %q", code, errOut)
	}
}

// Unix-domain failures traced for real: bind() onto a listening socket
// file, a stale one, an abstract name and a datagram socket's file,
// connect() to the stale file (ECONNREFUSED) and to a missing one (ENOENT).
// Each names the file or name and its holder, never ports, and the two
// paths bound in one netns within one interval get two diagnoses.
func TestDiagnoseUnix(t *testing.T) {
	ns := testns.New(t)
	py := eaddrtest.Python(t)
	dir := t.TempDir()
	abstract := fmt.Sprintf("@eaddr-test-%d", time.Now().UnixNano())
	holder := exec.Command(py, "-c", `import socket, sys, time
d, ab = sys.argv[1], b"\0" + sys.argv[2][1:].encode()
l = socket.socket(socket.AF_UNIX); l.bind(d + "/live.sock"); l.listen()
s = socket.socket(socket.AF_UNIX); s.bind(d + "/stale.sock"); s.close()
a = socket.socket(socket.AF_UNIX); a.bind(ab); a.listen()
g = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); g.bind(d + "/dgram.sock")
print("ready", flush=True)
time.sleep(600)
`, dir, abstract)
	out, _ := holder.StdoutPipe()
	if err := ns.Start(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf[:5]) != "ready" {
		t.Fatalf("holder did not start: %q %v", buf, err)
	}
	p := diagTrace(t, ns, "--errno", "EADDRINUSE,ECONNREFUSED,ENOENT")
	pid, printed := eaddrtest.RunInNS(t, ns, py, "-c", `import socket, sys
d, ab = sys.argv[1], b"\0" + sys.argv[2][1:].encode()
U, D = socket.AF_UNIX, socket.SOCK_DGRAM
for f in [lambda: socket.socket(U).bind(d + "/live.sock"), lambda: socket.socket(U).bind(d + "/stale.sock"),
          lambda: socket.socket(U).bind(ab), lambda: socket.socket(U, D).bind(d + "/dgram.sock"),
          lambda: socket.socket(U).connect(d + "/stale.sock"), lambda: socket.socket(U).connect(d + "/missing.sock")]:
    try:
        f()
    except OSError as e:
        print(e.errno)
`, dir, abstract)
	if got := strings.Fields(printed); !slices.Equal(got, []string{"98", "98", "98", "98", "111", "2"}) {
		t.Fatalf("the client's calls failed with %q", printed)
	}
	evs := p.ForPID(pid, 6, diagDeadline)
	if len(evs) != 6 {
		t.Fatalf("want 6 events, got %d: %+v", len(evs), evs)
	}
	held := fmt.Sprintf("held by pid %d python3", holder.Process.Pid)
	want := map[string]string{
		"bind " + dir + "/live.sock":       "the socket file " + dir + "/live.sock is in use (1 LISTEN, " + held + ")",
		"bind " + dir + "/stale.sock":      "stale socket file " + dir + "/stale.sock: it exists but no socket ",
		"bind " + abstract:                 "the abstract unix socket name " + abstract + " is taken (1 LISTEN, " + held + ")",
		"bind " + dir + "/dgram.sock":      "the socket file " + dir + "/dgram.sock is in use (1 UNCONNECTED, " + held + ")",
		"connect " + dir + "/stale.sock":   "stale socket file " + dir + "/stale.sock: nobody listens on it",
		"connect " + dir + "/missing.sock": "no such socket file " + dir + "/missing.sock",
	}
	for _, ev := range evs {
		a := ev.Local
		if ev.Syscall == "connect" {
			a = ev.Remote
		}
		if a == nil || ev.Diagnosis == nil {
			t.Errorf("event without address or diagnosis: %+v", ev)
			continue
		}
		key := ev.Syscall + " " + a.Path
		g := ev.Diagnosis
		fix := strings.Join(g.Fix, " | ")
		// Searching the other netns for a stale file's sockets has the
		// diagnosis wait as its budget (a minute here): it is not cut short,
		// so the file is stale, not "probably" stale.
		if !strings.HasPrefix(g.Verdict, want[key]) || want[key] == "" {
			t.Errorf("%s: verdict %q, want %q...", key, g.Verdict, want[key])
		}
		delete(want, key)
		if g.PortRange != "" || g.Shared || strings.Contains(g.Verdict+fix, "port") {
			t.Errorf("%s: port words or a shared snapshot: %+v", key, g)
		}
		if strings.Contains(g.Verdict, "held by") && (len(g.Holders) != 1 || g.Holders[0].PID != holder.Process.Pid || !strings.Contains(fix, fmt.Sprintf("pid %d (python3)", holder.Process.Pid))) {
			t.Errorf("%s: holders %+v, fix %q: want pid %d (python3)", key, g.Holders, fix, holder.Process.Pid)
		}
		if strings.HasPrefix(g.Verdict, "stale") && !strings.Contains(fix, "remove the stale socket file "+dir+"/stale.sock") {
			t.Errorf("%s: fix %q", key, fix)
		}
	}
}

// eaddr check without sock_diag (forced as on a kernel whose inet_diag
// modules cannot be loaded) reads /proc/net: the same report, and one log
// line with the fix.
func TestCheckProcNetFallback(t *testing.T) {
	full := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	eaddrtest.Sandbox(t, full)
	inode := strconv.FormatUint(full.Inode(), 10)
	want, wantCode := eaddrtest.RunCheckJSON(t, "--netns", inode)
	// sock_diag's fallback: without the socket iterators, which need no sock_diag
	cmd := exec.Command(eaddrtest.EaddrBin, "check", "-o", "json", "--netns", inode, "--socket-iterators=false")
	cmd.Env = append(os.Environ(), "EADDR_TESTING_NO_SOCK_DIAG=1")
	out, errOut, code := eaddrtest.RunCmd(t, cmd)
	var got diagnose.CheckReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("check output: %v\n%s\n%s", err, out, errOut)
	}
	if code != wantCode || len(got.NetNS) != 1 || len(want.NetNS) != 1 || got.NetNS[0].Error != "" ||
		fmt.Sprint(got.NetNS[0].Destinations) != fmt.Sprint(want.NetNS[0].Destinations) || got.NetNS[0].Worst != diagnose.SevCritical {
		t.Errorf("check with /proc/net (exit %d):\n%+v\nwith sock_diag (exit %d):\n%+v", code, got, wantCode, want)
	}
	if n := strings.Count(errOut, "modprobe inet_diag tcp_diag udp_diag"); n != 1 {
		t.Errorf("want one log line with the fix, got %d:\n%s", n, errOut)
	}
}
