package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// seedLine is what the pod printed.
const seedLine = "wget: can't connect to remote host (1.1.1.1): Address not available"

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
	rep := eaddrtest.DecodeExplain(t, out)
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
		out, errOut, code := eaddrtest.RunStdin(t, seedLine+"\n", args...)
		if code != 0 || !strings.HasPrefix(out, "EADDRNOTAVAIL (99) in connect()") || !strings.Contains(out, "busybox wget") {
			t.Errorf("echo LINE | eaddr %v: exit %d %s\n%s", args, code, errOut, out)
		}
	}
	log := "2026-12-03T10:00:00Z starting worker 3\n" +
		"2026-12-03T10:00:01Z GET /healthz 200\n" +
		"Connecting to 10.96.0.10:80... connected.\n" +
		"2026-12-03T10:00:05Z " + seedLine + "\n" +
		"2026-12-03T10:00:06Z retrying in 1s\n"
	out, errOut, code := eaddrtest.RunStdin(t, log, "explain")
	if code != 0 || !strings.Contains(out, "5 lines; 1 carries a failure eaddr knows (line 4); it explains line 4") ||
		!strings.Contains(out, `"2026-12-03T10:00:05Z wget: can't connect`) || !strings.Contains(out, "dst 1.1.1.1 |") {
		t.Errorf("a log on stdin: exit %d %s\n%s", code, errOut, out)
	}
	out, _, code = eaddrtest.RunStdin(t, log, "explain", "-o", "json")
	if rep := eaddrtest.DecodeExplain(t, out); code != 0 || rep.InputLines != 5 || rep.InputLine != 4 || rep.Errno != "EADDRNOTAVAIL" {
		t.Errorf("a log on stdin, -o json: exit %d %+v", code, rep)
	}
	out, _, code = eaddrtest.RunStdin(t, "all is well\nstill well\n", "explain")
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
