package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
	"github.com/eaddr/eaddr/pipeline"
)

// traceConfigOf parses args as `eaddr trace` would and checks them.
func traceConfigOf(args ...string) (pipeline.Config, error) {
	var f TraceFlags
	fs := pflag.NewFlagSet("trace", pflag.ContinueOnError)
	f.SetFlags(fs)
	if err := fs.Parse(args); err != nil {
		return pipeline.Config{}, err
	}
	return f.config()
}

// Flags that cannot work are refused at start with exit 2 and one line.
func TestFlagsCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(regular, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"trace", "--ring-size", "536870912"}, "256 MiB"},
		{[]string{"trace", "--ring-size", "2147483648"}, "256 MiB"},
		{[]string{"trace", "--ring-size", "4294967296"}, "256 MiB"},
		{[]string{"trace", "--ring-size", "1099511627776"}, "256 MiB"},
		{[]string{"trace", "--cgroup", "relprobe"}, "cgroup paths start with /"},
		{[]string{"trace", "--netns", "1"}, "--netns 1 is not a namespace inode"},
		{[]string{"trace", "--netns", "../etc"}, `--netns "../etc" is neither a namespace inode nor a name in /run/netns`},
		{[]string{"trace", "--netns", "4294967295"}, "--netns 4294967295: no network namespace"},
		{[]string{"trace", "--cri-endpoint", filepath.Join(dir, "missing.sock")}, "no such file"},
		{[]string{"trace", "--cri-endpoint", "unix://" + regular}, "is not a unix socket"},
		{[]string{"check", "--cri-endpoint", regular}, "is not a unix socket"},
		{[]string{"trace", "--names-wait", "0"}, "--names-wait must be from 1ns to 1m0s"},
		{[]string{"trace", "--diagnose-wait", "-1s"}, "--diagnose-wait must be from 1ns to 1m0s"},
		{[]string{"trace", "--retry-window", "2m"}, "--retry-window must be from 1ns to 1m0s"},
		{[]string{"trace", "--ports-interval", "-1s"}, "--ports-interval must not be negative"},
		{[]string{"trace", "--ports-top", "0"}, "--ports-top must be at least 1"},
		{[]string{"trace", "--ports-max-series", "0"}, "--ports-max-series must be at least 1"},
		{[]string{"trace", "--warn", "0"}, "--warn must be a percent from 1 to 100, not 0"},
		{[]string{"trace", "--warn", "101"}, "--warn must be a percent from 1 to 100, not 101"},
	} {
		if tc.args[1] == "--netns" && tc.args[2] != "1" && os.Geteuid() != 0 {
			// Without CAP_SYS_PTRACE eaddr cannot see other processes' netns,
			// so it cannot tell a missing one and lets the flag through.
			t.Logf("%q: not checked as uid %d", tc.args, os.Geteuid())
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a flag let through starts a trace
		out, errOut, code := eaddrtest.Run(t, ctx, tc.args...)
		cancel()
		if code != 2 || !strings.Contains(errOut, tc.stderr) || out != "" {
			t.Errorf("eaddr %q: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, errOut, out, tc.stderr)
		}
		if strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("eaddr %q: the usage error is not one line: %q", tc.args, errOut)
		}
	}
	help, _, _ := eaddrtest.Run(t, context.Background(), "trace", "--help")
	if !strings.Contains(help, "up to 256 MiB") || !strings.Contains(help, "must exist at start") || !strings.Contains(help, "must be a unix socket") {
		t.Errorf("trace --help does not state the bounds:\n%s", help)
	}
}

// The same checks let through what is right: the largest ring, an absolute
// cgroup prefix, a live netns (held only by an fd, or with a process in
// it), a unix socket with and without unix://.
func TestFlagsAcceptedAtStart(t *testing.T) {
	testenv.RequireRoot(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1") // no process inside: the test's fd keeps it
	withProc := testns.New(t)
	sleeper := exec.Command("sleep", "60")
	if err := withProc.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	withProc.Close() // from now on only the process holds it
	for _, args := range [][]string{
		{"--ring-size", strconv.Itoa(maxRingSize)},
		{"--cgroup", "/kubepods"},
		{"--netns", strconv.FormatUint(ns.Inode(), 10)},
		{"--netns", strconv.FormatUint(withProc.Inode(), 10)},
		{"--cri-endpoint", sock},
		{"--cri-endpoint", "unix://" + sock},
	} {
		if _, err := traceConfigOf(args...); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
	// The netns goes away with its last holder: then it is refused.
	inode := withProc.Inode()
	sleeper.Process.Kill()
	sleeper.Wait()
	if _, err := traceConfigOf("--netns", strconv.FormatUint(inode, 10)); err == nil {
		t.Errorf("--netns %d accepted after the netns was gone", inode)
	}
}

// The waits reach the pipeline as given, and their defaults are the
// pipeline's own.
func TestWaitFlags(t *testing.T) {
	c, err := traceConfigOf()
	if err != nil {
		t.Fatal(err)
	}
	if c.NamesWait != pipeline.DefaultNamesWait || c.DiagnoseWait != pipeline.DefaultDiagnoseWait || c.RetryWindow != 50*time.Millisecond {
		t.Errorf("defaults: names %v, diagnose %v, retry %v", c.NamesWait, c.DiagnoseWait, c.RetryWindow)
	}
	c, err = traceConfigOf("--names-wait", "2s", "--diagnose-wait", "3s", "--retry-window", "4s")
	if err != nil {
		t.Fatal(err)
	}
	if c.NamesWait != 2*time.Second || c.DiagnoseWait != 3*time.Second || c.RetryWindow != 4*time.Second {
		t.Errorf("given: names %v, diagnose %v, retry %v", c.NamesWait, c.DiagnoseWait, c.RetryWindow)
	}
}

// Without the privilege to look, check says what it needs in one line and
// exits 3: not 1, which cron and node-problem-detector read as a finding.
func TestCheckWithoutPrivilege(t *testing.T) {
	testenv.RequireRoot(t) // to drop privilege
	setpriv := testenv.Program(t, "setpriv", "util-linux")
	for _, tc := range []struct {
		name    string
		argv    []string
		nobody  bool
		missing string
	}{
		{"as nobody", []string{eaddrtest.EaddrBin, "check"}, true, "missing CAP_SYS_ADMIN and CAP_SYS_PTRACE"},
		{"root without CAP_SYS_PTRACE", []string{setpriv, "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace", eaddrtest.EaddrBin, "check"}, false, "missing CAP_SYS_PTRACE"},
		{"root without CAP_SYS_ADMIN", []string{setpriv, "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", eaddrtest.EaddrBin, "check", "-o", "json"}, false, "missing CAP_SYS_ADMIN"},
	} {
		cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
		if tc.nobody {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err == nil {
			code = 0
		}
		if code != 3 || out.String() != "" || !strings.Contains(errb.String(), tc.missing) || !strings.Contains(errb.String(), "root, or CAP_SYS_ADMIN and CAP_SYS_PTRACE") ||
			strings.Count(strings.TrimRight(errb.String(), "\n"), "\n") != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 3, one line naming %s", tc.name, code, out.String(), errb.String(), tc.missing)
		}
	}
	help, _, _ := eaddrtest.Run(t, context.Background(), "check", "--help")
	if !strings.Contains(help, "3  unknown:") || !strings.Contains(help, "check lacks the privilege") {
		t.Errorf("check --help does not document exit 3:\n%s", help)
	}
}

// explain reads at most 4 KiB and echoes at most 80 bytes: 5 MB of random
// bytes cost well under a second of CPU (CPU time: what the machine's load
// does not add to) and give a short answer that says the input was cut.
func TestExplainHugeInput(t *testing.T) {
	// 5 MB of arguments need a larger argv limit (a quarter of the stack
	// limit) than the default 8 MiB stack gives; each argument stays under
	// the kernel's 128 KiB per-string limit.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max != ^uint64(0) && old.Max < 64<<20 {
		testenv.Skip(t, "the stack hard limit is below 64 MiB: 5 MB of arguments cannot be passed")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &syscall.Rlimit{Cur: 64 << 20, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_STACK, &old) })
	rng := rand.New(rand.NewPCG(1, 2))
	var args []string
	const total, chunk = 5 << 20, 100 << 10
	for n := 0; n < total; n += chunk {
		b := make([]byte, chunk)
		for i := range b {
			b[i] = byte(rng.IntN(255) + 1) // no NUL: argv strings end there
		}
		args = append(args, string(b))
	}
	for _, output := range []string{"text", "json"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // fails a hang, not a busy machine
		cmd := exec.CommandContext(ctx, eaddrtest.EaddrBin, append([]string{"explain", "-o", output, "--"}, args...)...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("-o %s: explain of 5 MB did not finish within a minute", output)
		}
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			t.Fatalf("-o %s: %v: %s", output, err, errb.String())
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		t.Logf("-o %s: 5 MB of random bytes: %v CPU, %v wall, %d bytes of output", output, cpu, wall.Round(time.Millisecond), out.Len())
		if cpu > time.Second {
			t.Errorf("-o %s: %v of CPU for 5 MB", output, cpu)
		}
		if out.Len() > 2048 {
			t.Errorf("-o %s: %d bytes of output: the input is echoed back", output, out.Len())
		}
		if output == "text" && !strings.Contains(out.String(), "cut to the first 409") {
			t.Errorf("the output does not say the input was cut:\n%s", out.String())
		}
		if output == "json" {
			var rep struct {
				Input      string `json:"input"`
				InputBytes int    `json:"input_bytes"`
				InputCut   bool   `json:"input_cut"`
			}
			if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
				t.Fatalf("-o json: %v: %s", err, out.String())
			}
			if utf8.RuneCountInString(rep.Input) > maxExcerpt || !rep.InputCut || rep.InputBytes < total {
				t.Errorf("-o json: input %d bytes, input_bytes %d, input_cut %v", len(rep.Input), rep.InputBytes, rep.InputCut)
			}
		}
	}
}
