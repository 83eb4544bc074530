package kernel

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// explainConfirm is what the JSON answer says to run for text, the
// commands on one line each.
func explainConfirm(t *testing.T, text string) eaddrtest.ExplainJSON {
	t.Helper()
	out, errOut, code := eaddrtest.RunStdin(t, text+"\n", "explain", "-o", "json")
	if code != 0 {
		t.Fatalf("eaddr explain of %q: exit %d %s %s", text, code, errOut, out)
	}
	return eaddrtest.DecodeExplain(t, out)
}

// runConfirm runs a command explain gave, in the network namespace of pid
// (its PID), with sh -c as a person's shell would.
func runConfirm(t *testing.T, cmd string, pid int) string {
	t.Helper()
	cmd = strings.ReplaceAll(cmd, "PID", strconv.Itoa(pid))
	out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// The commands explain gives confirm the cause when run as they are
// written, in a netns whose two ports toward 127.0.0.1:8080 are held: the
// text of a real busybox wget (an address, no port), of a real curl (both)
// and a bare errno text (neither) each lead to ss's count of the sockets
// toward 127.0.0.1:8080 on top; the sysctl shows the range; the NETNS of
// the placeholders' stat feeds `eaddr check --netns`, which finds the
// destination critical. (kubectl debug runs the same /eaddr; deploy's
// TestDebugCommand checks that prefix.)
func TestExplainConfirmCommandsRun(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1") // ports 40000-40001, both held toward 127.0.0.1:8080
	pid := eaddrtest.Sandbox(t, ns)
	testenv.Program(t, "nsenter", "util-linux")
	testenv.Program(t, "ss", "iproute2")
	busybox := testenv.Program(t, "busybox", "busybox-static")
	curl := testenv.Program(t, "curl", "curl")
	var texts []string
	for _, argv := range [][]string{{busybox, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/"}, {curl, "-sS", "http://127.0.0.1:8080/"}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := ns.Start(cmd); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		texts = append(texts, strings.TrimSpace(errb.String()))
	}
	texts = append(texts, "Cannot assign requested address")
	for _, text := range texts {
		rep := explainConfirm(t, text)
		t.Logf("%q: %s", text, rep.Confirm[0])
		if !strings.HasPrefix(rep.Confirm[0], explain.NetnsPrefix+" ss -Htan") {
			t.Fatalf("%q: the first command is %q", text, rep.Confirm[0])
		}
		top := strings.Fields(runConfirm(t, rep.Confirm[0], pid))
		if len(top) < 3 || top[0] != "2" || top[1] != "127.0.0.1:8080" || top[2] != "ESTAB" {
			t.Errorf("%q: %s shows %q on top, want 2 127.0.0.1:8080 ESTAB", text, rep.Confirm[0], top)
		}
	}
	rep := explainConfirm(t, texts[0])
	if out := runConfirm(t, rep.Confirm[1], pid); !strings.Contains(out, "40000\t40001") {
		t.Errorf("%s: %q", rep.Confirm[1], out)
	}
	_, stat, ok := strings.Cut(rep.Placeholders["NETNS"], ": ")
	if !ok {
		t.Fatalf("NETNS: %q", rep.Placeholders["NETNS"])
	}
	inode := strings.TrimSpace(runConfirm(t, stat, pid))
	if inode != fmt.Sprint(ns.Inode()) {
		t.Fatalf("%s: %q, the netns is %d", stat, inode, ns.Inode())
	}
	check, ok := strings.CutPrefix(rep.Confirm[2], explain.DebugPrefix+" /eaddr ")
	if !ok {
		t.Fatalf("not an eaddr command in a debug pod: %q", rep.Confirm[2])
	}
	args := strings.Fields(strings.ReplaceAll(check, "NETNS", inode))
	out, errOut, code := eaddrtest.Run(t, context.Background(), args...)
	if code != 1 || !strings.Contains(out, "127.0.0.1:8080") {
		t.Errorf("eaddr %s: exit %d, want 1 (critical) naming 127.0.0.1:8080:\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
}

// Which nc binds before it connects, run for real: OpenBSD nc binds its -p
// port first (a busy one fails in bind() with the words explain labels
// "binds before connect"); Debian's busybox nc (busybox's default nc.c)
// ignores -p when it connects and never binds, as its catalog note says.
func TestNetcatBindOrder(t *testing.T) {
	openbsd := testenv.Program(t, "nc.openbsd", "netcat-openbsd")
	busybox := testenv.Program(t, "busybox", "busybox-static")
	dst, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eaddrtest.AcceptAll(t, dst, false)
	busy, err := net.Listen("tcp4", "127.0.0.1:0") // holds the port nc is told to bind
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dport := strconv.Itoa(dst.Addr().(*net.TCPAddr).Port)
	lport := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)

	out, err := exec.Command(openbsd, "-p", lport, "127.0.0.1", dport).CombinedOutput()
	printed := strings.TrimSpace(string(out))
	if err == nil || printed != "nc.openbsd: bind failed: Address already in use" && printed != "nc: bind failed: Address already in use" {
		t.Fatalf("OpenBSD nc -p BUSY: %v %q, want a failed bind()", err, printed)
	}
	rep := explainConfirm(t, printed)
	labelled := false
	for _, w := range rep.Other {
		if w.By == "OpenBSD nc (glibc, binds before connect)" {
			labelled = strings.HasSuffix(printed, strings.TrimPrefix(w.Text, "nc"))
		}
	}
	if rep.Client != "OpenBSD nc" || rep.Syscall != "bind" || !labelled {
		t.Errorf("explain of %q: client %q syscall %q; the wording labelled binds before connect is not it: %+v", printed, rep.Client, rep.Syscall, rep.Other)
	}

	cmd := exec.Command(busybox, "nc", "-p", lport, "127.0.0.1", dport)
	cmd.Stdin = strings.NewReader("")
	out, err = cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "bind") {
		t.Errorf("busybox nc -p BUSY: %v %q: it bound the port; the catalog says this build connects without bind()", err, out)
	}
}
