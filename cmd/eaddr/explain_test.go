package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// seedLine is what the pod printed.
const seedLine = "wget: can't connect to remote host (1.1.1.1): Address not available"

// runStdin runs eaddr with stdin.
func runStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(eaddrtest.EaddrBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return eaddrtest.RunCmd(t, cmd)
}

// explainJSON is the part of `eaddr explain -o json` the tests read.
type explainJSON struct {
	Input        string                      `json:"input"`
	InputLines   int                         `json:"input_lines"`
	InputLine    int                         `json:"input_line"`
	Recognised   bool                        `json:"recognised"`
	Errno        string                      `json:"errno"`
	ErrnoNum     int                         `json:"errno_num"`
	Syscall      string                      `json:"syscall"`
	Client       string                      `json:"client"`
	Libc         string                      `json:"libc"`
	Language     string                      `json:"language"`
	Summary      string                      `json:"summary"`
	Other        []struct{ By, Text string } `json:"other_wordings"`
	Confirm      []string                    `json:"confirm"`
	ConfirmWhy   []string                    `json:"confirm_why"`
	Placeholders map[string]string           `json:"placeholders"`
	Closest      []struct{ By, Text string } `json:"closest"`
}

func decodeExplain(t *testing.T, out string) explainJSON {
	t.Helper()
	var r explainJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

// eaddr explain recognises the lines people paste, offline and without
// root, and answers first: the errno, who printed it, the causes, the
// commands.
func TestExplainCommand(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"can't connect to remote host (1.1.1.1): Address not available", []string{"EADDRNOTAVAIL (99) in connect()", "busybox wget, with musl's strerror", "ip_local_port_range", "nsenter -t PID -n ss -Htan dst 1.1.1.1 |"}},
		{"(7) Couldn't connect to server", []string{"curl", "errno not in the text", "curl -v", "eaddr trace --errno all"}},
		{"curl: (7) Failed to connect to 10.96.0.10 port 80 after 3 ms: Could not connect to server", []string{"printed by curl", "dst 10.96.0.10:80"}},
		{"bind: Address in use", []string{"EADDRINUSE (98) in bind()", "musl", "sport = :PORT"}},
		{"Cannot assign requested address", []string{"EADDRNOTAVAIL (99), most likely in connect()", "glibc's strerror text", "a program eaddr does not know", "ss -Htan | awk"}},
		{"99", []string{"EADDRNOTAVAIL (99), most likely in connect() (the text does not say)"}},
		// A program nobody catalogued: the errno, and no client claimed.
		{"myapp: connect: Cannot assign requested address", []string{"EADDRNOTAVAIL (99)", "a program eaddr does not know"}},
		{"EADDRINUSE", []string{"EADDRINUSE (98)"}},
		{"java.net.NoRouteToHostException: Cannot assign requested address", []string{"EADDRNOTAVAIL (99) in connect()", "printed by Java"}},
		{"Die angeforderte Adresse kann nicht zugewiesen werden", []string{"EADDRNOTAVAIL (99)", "translated (de)"}},
	} {
		out, errOut, code := eaddrtest.Run(t, ctx, "explain", tc.in)
		if code != 0 {
			t.Errorf("explain %q: exit %d %s", tc.in, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("explain %q lacks %q:\n%s", tc.in, w, out)
			}
		}
	}
	out, _, code := eaddrtest.Run(t, ctx, "explain", "-o", "json", seedLine)
	rep := decodeExplain(t, out)
	if code != 0 || rep.Errno != "EADDRNOTAVAIL" || rep.ErrnoNum != 99 || rep.Client != "busybox wget" || rep.Libc != "musl" ||
		len(rep.Other) < 10 || len(rep.Confirm) == 0 || len(rep.ConfirmWhy) != len(rep.Confirm) || rep.Placeholders["PID"] == "" || rep.Summary == "" {
		t.Errorf("explain -o json: exit %d %+v", code, rep)
	}
	out, _, code = eaddrtest.Run(t, ctx, "explain", "the printer is on fire")
	if code != 1 || !strings.Contains(out, "not recognised") || !strings.Contains(out, "LC_ALL=C") {
		t.Errorf("unknown text: exit %d, %q", code, out)
	}
	out, _, code = eaddrtest.Run(t, ctx, "explain", "Le serveur a refusé: ça ne marche pas")
	if code != 1 || !strings.Contains(out, "not in English") || !strings.Contains(out, "strace -f -e trace=connect,bind") {
		t.Errorf("foreign text: exit %d, %q", code, out)
	}
	// run's stdin is /dev/null: no argument reads it, and finds nothing.
	_, errOut, code := eaddrtest.Run(t, ctx, "explain")
	if code != 2 || !strings.Contains(errOut, "read nothing on stdin") {
		t.Errorf("no argument, empty stdin: exit %d, %q", code, errOut)
	}
	help, _, code := eaddrtest.Run(t, ctx, "explain", "--help")
	if code != 0 || !strings.Contains(help, "reads stdin") || !strings.Contains(help, "--full") {
		t.Errorf("--help does not say it reads stdin, or lacks --full: exit %d\n%s", code, help)
	}
}

// `echo LINE | eaddr explain`, `eaddr explain -`, and a log on stdin: the
// line that carries the failure is explained, and said to be.
func TestExplainStdin(t *testing.T) {
	for _, args := range [][]string{{"explain"}, {"explain", "-"}} {
		out, errOut, code := runStdin(t, seedLine+"\n", args...)
		if code != 0 || !strings.HasPrefix(out, "EADDRNOTAVAIL (99) in connect()") || !strings.Contains(out, "busybox wget") {
			t.Errorf("echo LINE | eaddr %v: exit %d %s\n%s", args, code, errOut, out)
		}
	}
	log := "2026-12-03T10:00:00Z starting worker 3\n" +
		"2026-12-03T10:00:01Z GET /healthz 200\n" +
		"Connecting to 10.96.0.10:80... connected.\n" +
		"2026-12-03T10:00:05Z " + seedLine + "\n" +
		"2026-12-03T10:00:06Z retrying in 1s\n"
	out, errOut, code := runStdin(t, log, "explain")
	if code != 0 || !strings.Contains(out, "5 lines; 1 carries a failure eaddr knows (line 4); it explains line 4") ||
		!strings.Contains(out, `"2026-12-03T10:00:05Z wget: can't connect`) || !strings.Contains(out, "dst 1.1.1.1 |") {
		t.Errorf("a log on stdin: exit %d %s\n%s", code, errOut, out)
	}
	out, _, code = runStdin(t, log, "explain", "-o", "json")
	if rep := decodeExplain(t, out); code != 0 || rep.InputLines != 5 || rep.InputLine != 4 || rep.Errno != "EADDRNOTAVAIL" {
		t.Errorf("a log on stdin, -o json: exit %d %+v", code, rep)
	}
	out, _, code = runStdin(t, "all is well\nstill well\n", "explain")
	if code != 1 || !strings.Contains(out, "2 lines; none carries a failure") {
		t.Errorf("a log without a failure: exit %d\n%s", code, out)
	}
}

// 5 MB of random bytes on stdin: explain reads 64 KiB, says it cut, and
// costs well under a second of CPU (CPU time: what the machine's load does
// not add to).
func TestExplainStdinHuge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 5<<20)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	for _, output := range []string{"text", "json"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // fails a hang, not a busy machine
		cmd := exec.CommandContext(ctx, eaddrtest.EaddrBin, "explain", "-o", output)
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout = bytes.NewReader(b), &out
		err := cmd.Run()
		cancel()
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			t.Fatalf("-o %s: %v", output, err)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		t.Logf("-o %s: 5 MB of random bytes on stdin: %v CPU, %d bytes of output", output, cpu, out.Len())
		if cpu > time.Second {
			t.Errorf("-o %s: %v of CPU", output, cpu)
		}
		if output == "text" && !strings.Contains(out.String(), "stdin, cut to the first 65536 bytes") {
			t.Errorf("does not say it cut stdin:\n%s", out.String())
		}
		if output == "json" && !strings.Contains(out.String(), `"input_cut":true`) {
			t.Errorf("-o json does not say it cut: %s", out.String())
		}
	}
}

// In explain's output: an IPv4 address (with its port), a bracketed IPv6
// address (with its port), a port after "port " or ss's ":".
var (
	ipv4Re = regexp.MustCompile(`\b([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)(?::([0-9]+))?`)
	ipv6Re = regexp.MustCompile(`\[([0-9a-fA-F:.]+)\](?::([0-9]+))?`)
	portRe = regexp.MustCompile(`\bport ([0-9]+)|[sd]port = :([0-9]+)`)
)

// Neither the answer nor --full nor the JSON holds an address or port the
// text does not carry (but Node's unbound 0.0.0.0:0 and [::]:0, and "binds
// port 0"): a port eaddr made up sends ss looking at the wrong sockets.
func TestExplainInventsNothing(t *testing.T) {
	ctx := context.Background()
	for _, in := range []string{
		seedLine,
		"Cannot assign requested address",
		"curl: (7) Failed to connect to 10.96.0.10 port 443 after 3 ms: Couldn't connect to server",
		"ssh: connect to host db port 5432: Cannot assign requested address",
		"dial tcp [fd00::a]:9000: connect: cannot assign requested address",
		"bind: Address in use",
		"the printer is on fire",
	} {
		inNums := map[string]bool{"0": true}
		for _, n := range regexp.MustCompile(`[0-9a-fA-F:.]+`).FindAllString(in, -1) {
			inNums[n] = true
			for _, part := range regexp.MustCompile(`[0-9]+`).FindAllString(n, -1) {
				inNums[part] = true
			}
		}
		for _, args := range [][]string{{"explain", in}, {"explain", "--full", in}, {"explain", "-o", "json", in}} {
			out, _, _ := eaddrtest.Run(t, ctx, args...)
			var found []string
			for _, m := range append(ipv4Re.FindAllStringSubmatch(out, -1), ipv6Re.FindAllStringSubmatch(out, -1)...) {
				if m[1] != "0.0.0.0" && m[1] != "::" {
					found = append(found, m[1])
				}
				found = append(found, m[2])
			}
			for _, m := range portRe.FindAllStringSubmatch(out, -1) {
				found = append(found, m[1], m[2])
			}
			for _, v := range found {
				if ip, err := netip.ParseAddr(v); err == nil && ip.Is6() {
					v = ip.String() // socat writes IPv6 addresses out in full
				}
				if v != "" && !inNums[v] {
					t.Errorf("%v: %s is in the output, not in the text", args, v)
				}
			}
		}
	}
}

// The answer fits 120 columns and gives a command to confirm within its
// first 25 lines.
func TestExplainFirstScreen(t *testing.T) {
	out, _, code := eaddrtest.Run(t, context.Background(), "explain", seedLine)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	first := 0
	for i, l := range lines {
		if len([]rune(l)) > 120 {
			t.Errorf("line %d is %d columns wide: %q", i+1, len([]rune(l)), l)
		}
		if first == 0 && strings.HasPrefix(l, "  nsenter -t PID -n ") {
			first = i + 1
		}
	}
	t.Logf("explain of the seed line: %d lines, the first command to confirm on line %d", len(lines), first)
	if code != 0 || first == 0 || first > 25 {
		t.Errorf("exit %d, first command on line %d:\n%s", code, first, out)
	}
}

// explainConfirm is what the JSON answer says to run for text, the
// commands on one line each.
func explainConfirm(t *testing.T, text string) explainJSON {
	t.Helper()
	out, errOut, code := runStdin(t, text+"\n", "explain", "-o", "json")
	if code != 0 {
		t.Fatalf("eaddr explain of %q: exit %d %s %s", text, code, errOut, out)
	}
	return decodeExplain(t, out)
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
	defer dst.Close()
	go func() {
		for {
			c, err := dst.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
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

// In a real terminal of 120 columns and 40 rows: explain's answer to the
// seed line (errno, client, a command to confirm) is on the first screen
// with no wrapped line, piped or given as an argument; with no argument and
// the terminal as stdin it is a usage error (2).
func TestExplainTmux(t *testing.T) {
	// sleep: the pane lives on, its screen as explain left it (no "Pane is
	// dead" line), and the session is there to capture however fast
	// explain exits.
	p := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf(`%[1]s explain %[2]q; echo EXITED $?; sleep 600`, eaddrtest.EaddrBin, seedLine))
	checkAnswerScreen(t, p)
	q := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf(`echo %[2]q | %[1]s explain; echo EXITED $?; sleep 600`, eaddrtest.EaddrBin, seedLine))
	checkAnswerScreen(t, q)

	u := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf(`%s explain; echo EXITED $?; sleep 600`, eaddrtest.EaddrBin))
	screen := u.WaitFor("eaddr explain without an argument", func(s string) bool { return strings.Contains(s, "EXITED") })
	if !strings.Contains(screen, "EXITED 2") || !strings.Contains(screen, "explain needs the text") {
		t.Errorf("no argument at a terminal: want a usage error and exit 2:\n%s", screen)
	}
}

// checkAnswerScreen: the answer starts the screen, all of it is on the
// screen (its end too), and no line wrapped.
func checkAnswerScreen(t *testing.T, p *eaddrtest.TmuxPane) {
	t.Helper()
	screen := p.WaitFor("eaddr explain's answer", func(s string) bool { return strings.Contains(s, "EXITED") })
	if !strings.HasPrefix(screen, "EADDRNOTAVAIL (99) in connect():") || !strings.Contains(screen, "printed by busybox wget") ||
		!strings.Contains(screen, "  nsenter -t PID -n ss -Htan dst 1.1.1.1 |") || !strings.Contains(screen, "EXITED 0") {
		t.Errorf("the first screen lacks the answer (errno, client, a command) or its end:\n%s", screen)
	}
	p.NoWrapped(p.History())
}
