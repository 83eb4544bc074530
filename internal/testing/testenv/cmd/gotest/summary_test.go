package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestSummaryOfARealRun runs go test -json on testdata/sample (a test of each
// outcome) and checks what make test would print: the failing test's output
// and nothing of the passing one's, each skip with its reason, and the one
// summary line with the counts, the package to install and the command.
func TestSummaryOfARealRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot run go test -json")
	}
	cmd := exec.Command(goBin, "test", "-json", "-count=1", "./testdata/sample")
	cmd.Env = append(os.Environ(), "GOTEST_SAMPLE_FAIL=1", "EADDR_REQUIRE_BPF=")
	stream, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("go test -json: %v (a failing test must make it exit 1)", err)
	}
	var out bytes.Buffer
	s := newSummary(&out)
	if err := s.read(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	s.finish(false)
	got := out.String()
	t.Logf("rendered:\n%s", got)
	for _, want := range []string{
		"--- FAIL: TestFails",
		"printed: the test failed",
		"FAIL\tgithub.com/eaddr/eaddr/internal/testing/testenv/cmd/gotest/testdata/sample",
		"TestNeedsPackage: frobnicator is not installed (Debian package frob-tools)",
		"TestSubtests/needs-root: test requires root",
		"TestSubtests/other: the moon is full",
		"tests: 3 passed, 1 failed, 3 skipped (1 lack a Debian package: frob-tools; 1 need root; 1 for another reason, listed above); " +
			"install what every test needs with `sudo make deps` (or only these: sudo apt-get install frob-tools); run the root tests with `sudo make test`\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, not := range []string{"not printed", "=== RUN", "PASS\n"} {
		if strings.Contains(got, not) {
			t.Errorf("printed %q, which a plain go test does not print", not)
		}
	}
	if i, j := strings.Index(got, "--- FAIL: TestFails"), strings.Index(got, "printed: the test failed"); i > j {
		t.Error("the --- FAIL line must come before the test's output, as go test prints it")
	}
}

// TestSummaryNoSkips: with nothing skipped the line says only the counts.
func TestSummaryNoSkips(t *testing.T) {
	s := &summary{passed: 4}
	if got, want := s.line(true), "tests: 4 passed, 0 failed, 0 skipped"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestSummaryUnfinished: a test that never ended (a timeout's panic) counts
// as failed and its output is printed at its package's end.
func TestSummaryUnfinished(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out)
	in := `{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p"}
`
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if s.failed != 1 || !strings.Contains(out.String(), "panic: test timed out") || !strings.Contains(out.String(), "FAIL\tp") {
		t.Errorf("failed %d, printed:\n%s", s.failed, out.String())
	}
}

// TestSummarySeveralPackages: a skip that names several packages (critest's
// prerequisites) lists them all and counts the test once.
func TestSummarySeveralPackages(t *testing.T) {
	s := &summary{skip: 1, skips: []skipped{{"p", "TestPod", "critest: " + testenv.NotInstalled("runc", "runc") + "; " +
		testenv.NotInstalled("/usr/lib/cni/bridge", "containernetworking-plugins")}}}
	got := s.line(true)
	want := "tests: 0 passed, 0 failed, 1 skipped (1 lack a Debian package: containernetworking-plugins runc); " +
		"install what every test needs with `sudo make deps` (or only these: sudo apt-get install containernetworking-plugins runc)"
	if got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}

// TestSummarySlowest: the ten slowest top-level tests, slowest first, with
// their seconds and their share of all the tests' seconds; subtests and
// skips are not among them.
func TestSummarySlowest(t *testing.T) {
	var in strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&in, `{"Action":"pass","Package":"github.com/eaddr/eaddr/p","Test":"Test%d","Elapsed":%d}`+"\n", i, i)
	}
	in.WriteString(`{"Action":"pass","Package":"github.com/eaddr/eaddr/p","Test":"Test12/sub","Elapsed":100}` + "\n")
	in.WriteString(`{"Action":"skip","Package":"github.com/eaddr/eaddr/p","Test":"TestSkip","Elapsed":200}` + "\n")
	in.WriteString(`{"Action":"fail","Package":"github.com/eaddr/eaddr/p","Test":"TestFail","Elapsed":50}` + "\n")
	var out bytes.Buffer
	s := newSummary(&out)
	if err := s.read(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	s.printSlowest()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 11 || lines[0] != "slowest 10 of 13 tests (122 s of 128 s in tests):" ||
		lines[1] != "    50.0 s  p TestFail" || lines[2] != "    12.0 s  p Test12" || lines[10] != "     4.0 s  p Test4" {
		t.Errorf("printed:\n%s", out.String())
	}
}
