package kernel

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A real netns with no process left in it cannot be entered: check calls
// it unknown with why and exits 3, also beside a clean one; beside a
// critical one it exits 1.
func TestCheckUnknownNetNS(t *testing.T) {
	empty := testns.New(t) // held by this test's fd only: no process to enter it through
	emptyInode := strconv.FormatUint(empty.Inode(), 10)
	rep, code := eaddrtest.RunCheckJSON(t, "--netns", emptyInode)
	if code != 3 || rep.Worst != diagnose.SevUnknown || len(rep.NetNS) != 1 || rep.NetNS[0].Worst != diagnose.SevUnknown ||
		!strings.Contains(rep.NetNS[0].Error, "no live process") || !eaddrtest.HasFinding(rep.NetNS[0], diagnose.SevUnknown, "not audited") {
		t.Errorf("netns without a process: exit %d %+v, want exit 3 and unknown with why", code, rep)
	}
	_, errOut, _ := eaddrtest.Run(t, context.Background(), "check", "--netns", emptyInode)
	if !strings.Contains(errOut, "none of the 1 network namespaces could be audited") {
		t.Errorf("stderr %q does not say nothing was audited", errOut)
	}

	clean := testns.New(t)
	eaddrtest.Sandbox(t, clean)
	if err := clean.SetSysctl("net.ipv4.ip_local_port_range", "40000 50001"); err != nil {
		t.Fatal(err)
	}
	cleanInode := strconv.FormatUint(clean.Inode(), 10)
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", cleanInode)
	if code != 0 || rep.Worst > diagnose.SevInfo {
		t.Fatalf("clean netns: exit %d %+v", code, rep)
	}
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", cleanInode, "--netns", emptyInode)
	if code != 3 || rep.Worst != diagnose.SevUnknown || len(rep.NetNS) != 2 {
		t.Errorf("clean and unknown netns: exit %d worst %v, want 3 and unknown", code, rep.Worst)
	}
	out, _, code := eaddrtest.Run(t, context.Background(), "check", "--netns", cleanInode, "--netns", emptyInode)
	if code != 3 || !strings.Contains(out, "UNKNOWN") || !strings.Contains(out, "worst: UNKNOWN") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}

	full := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	eaddrtest.Sandbox(t, full)
	rep, code = eaddrtest.RunCheckJSON(t, "--netns", strconv.FormatUint(full.Inode(), 10), "--netns", emptyInode)
	if code != 1 || rep.Worst != diagnose.SevCritical {
		t.Errorf("critical and unknown netns: exit %d worst %v, want 1 and critical", code, rep.Worst)
	}
}

// holderScript listens on 127.0.0.1:8080 and connects to itself argv[2]
// times, keeping both ends: each connection holds a port of the range. With
// argv[1], it first names itself so (/proc/self/comm, as prctl
// PR_SET_NAME does).
const holderScript = `import os, socket, sys, time
if sys.argv[1]:
    with open("/proc/self/comm", "wb") as f:
        f.write(os.fsencode(sys.argv[1]))
l = socket.socket()
l.bind(("127.0.0.1", 8080))
l.listen(64)
held = []
for _ in range(int(sys.argv[2])):
    held += [socket.create_connection(("127.0.0.1", 8080)), l.accept()[0]]
print("ready", flush=True)
time.sleep(600)
`

// heldNetNS is a fresh netns whose 10 ports (40000-40009) a python3 in it
// holds toward 127.0.0.1:8080, named comm ("" keeps python3): every
// connect() toward it fails. It returns the netns and the holder's pid.
func heldNetNS(t *testing.T, comm string) (*netns.NS, int) {
	t.Helper()
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "40000 40009"); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(eaddrtest.Python(t), "-c", holderScript, comm, "10")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := ns.Start(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the holder did not start: %q %v", line, err)
	}
	return ns, holder.Process.Pid
}

// screenOf runs eaddr with args in a 120x40 tmux and returns all it
// printed there once it exited (the scrollback too: tmux's own "Pane is
// dead" line can scroll the first one off the screen), failing on any line
// the terminal had to wrap.
func screenOf(t *testing.T, args string) string {
	t.Helper()
	p := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf("%s %s; echo EXITED $?", eaddrtest.EaddrBin, args))
	p.WaitFor("eaddr exiting", func(s string) bool { return strings.Contains(s, "EXITED") })
	h := p.History()
	p.NoWrapped(h)
	return h
}

// onScreen fails for each of wants the screen of what does not show, and
// logs the screen.
func onScreen(t *testing.T, what, screen string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(screen, want) {
			t.Errorf("%s: no %q on the screen", what, want)
		}
	}
	t.Logf("%s at 120 columns:\n%s", what, strings.TrimRight(screen, "\n"))
}

// At a 120-column terminal, check and top --once name the holder of a
// netns's exhausted ports, by pid and comm, and its fix, under the
// critical destination, with no line wider than the terminal.
func TestCheckNamesTheCulprit(t *testing.T) {
	ns, pid := heldNetNS(t, "")
	inode := strconv.FormatUint(ns.Inode(), 10)
	check := screenOf(t, "check --netns "+inode)
	onScreen(t, "eaddr check", check, "CRITICAL", "TOWARD-DEST  HELD-FOR-ALL", "127.0.0.1:8080  10           0             10     10     100%  exhausted",
		fmt.Sprintf("    held by: pid %d (python3) with 10 sockets\n", pid),
		fmt.Sprintf("    fix: pid %d (python3) holds 10 connections to this destination: reuse connections", pid), "EXITED 1")
	top := screenOf(t, "top --once --interval 0 --netns "+inode)
	onScreen(t, "eaddr top --once", top, "TAKEN/USABLE", "127.0.0.1:8080  10/10", "[##########] 100%",
		fmt.Sprintf("\n  held by: pid %d (python3) with 10 sockets\n", pid),
		fmt.Sprintf("\n  fix: pid %d (python3) holds 10 connections to this destination", pid), "EXITED 0")

	// the live view: the holder and fix under the worst row, cut to the terminal
	p := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf("%s top --interval 300ms --netns %s", eaddrtest.EaddrBin, inode))
	held := fmt.Sprintf("\n  held by: pid %d (python3) with 10 sockets\n", pid)
	live := p.WaitFor("the holder under the row", func(s string) bool { return strings.Contains(s, held) })
	if !strings.Contains(live, fmt.Sprintf("\n  fix: pid %d (python3) holds 10 connections", pid)) {
		t.Errorf("eaddr top: no fix under the holder:\n%s", live)
	}
	p.NoWrapped(p.History())
	p.Keys("q")
}

// A holder whose name is a terminal escape (OSC 52 writes the clipboard)
// reaches check's and top's tables escaped, never as the escape; the JSON
// carries it as JSON escapes it.
func TestCheckHostileComm(t *testing.T) {
	const comm = "\x1b]52;c;aGk=\x07"
	ns, pid := heldNetNS(t, comm)
	inode := strconv.FormatUint(ns.Inode(), 10)
	escaped := fmt.Sprintf(`pid %d (\x1b]52;c;aGk=\x07)`, pid)
	for _, args := range [][]string{{"check", "--netns", inode}, {"top", "--once", "--interval", "0", "--netns", inode}} {
		out, _, _ := eaddrtest.Run(t, context.Background(), args...)
		if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "held by: "+escaped) || !strings.Contains(out, "fix: "+escaped) {
			t.Errorf("eaddr %s: an escape reached the table, or the holder is not named escaped:\n%q", args[0], out)
		}
	}
	rep, _ := eaddrtest.RunCheckJSON(t, "--netns", inode)
	if len(rep.NetNS) != 1 || len(rep.NetNS[0].Destinations) == 0 || len(rep.NetNS[0].Destinations[0].Holders) != 1 ||
		rep.NetNS[0].Destinations[0].Holders[0].Comm != comm {
		t.Errorf("check -o json: %+v, want the holder's comm as it is", rep)
	}
}

// A netns made with ip netns add, with no process in it, is found through
// its mount and audited through it: its range, reserved ports and the
// ports this test holds in it from outside (the holder found in another
// netns), named by its name; the fix and holder as for any netns.
func TestCheckMountedNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	ip := testenv.Program(t, "ip", "iproute2")
	name := fmt.Sprintf("eaddr-check-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v: %s", err, out)
		}
	})
	for _, c := range [][]string{{"-n", name, "link", "set", "lo", "up"}, {"netns", "exec", name, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40009", "net.ipv4.ip_local_reserved_ports=40008-40009"}} {
		if out, err := exec.Command(ip, c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %q: %v: %s", c, err, out)
		}
	}
	ns, err := netns.Open("/run/netns/" + name) // this test's hand in it; no process of it is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for range 8 { // the 8 ports left by the reserve; the kernel completes them in the listener's backlog
		c, err := ns.Dial("tcp4", "127.0.0.1:8080")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}

	rep, _ := eaddrtest.RunCheckJSON(t) // every netns: this one is found only through its mount
	var r *diagnose.NetNSReport
	for i := range rep.NetNS {
		if rep.NetNS[i].Inode == ns.Inode() {
			r = &rep.NetNS[i]
		}
	}
	if r == nil {
		t.Fatalf("netns %d (%s) not audited: %+v", ns.Inode(), name, rep)
	}
	d := r.Destinations
	if r.Error != "" || r.PID != 0 || r.Mount != "/run/netns/"+name || r.PortRange != "40000-40009" || r.Reserved != "40008-40009" || r.Usable != 8 ||
		r.Worst != diagnose.SevCritical || len(d) != 1 || !d[0].Exhausted || len(d[0].Holders) != 1 || d[0].Holders[0].PID != os.Getpid() || len(d[0].Fix) == 0 {
		t.Errorf("netns %s: %+v, want it audited through its mount: 8 usable, exhausted, this test the holder", name, r)
	}
	out, _, _ := eaddrtest.Run(t, context.Background(), "check", "--netns", strconv.FormatUint(ns.Inode(), 10))
	for _, want := range []string{"netns " + name + "  CRITICAL", "no process in it: entered through /run/netns/" + name,
		"its sockets: ip netns exec " + name + " ss -tanp", fmt.Sprintf("held by: pid %d (", os.Getpid())} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
