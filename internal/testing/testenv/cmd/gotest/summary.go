package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's pass, fail or skip
}

// test is what was seen of one test or subtest.
type test struct {
	pkg, name string
	out       []string
	result    string // pass, fail, skip; "" while it runs
}

type skipped struct {
	pkg, name, reason string
}

// summary renders the stream as a plain go test would and keeps the skips.
type summary struct {
	w                    io.Writer
	running              map[string]*test // package + "\x00" + test
	order                []*test          // tests in the order they started, until their top-level test ends
	passed, failed, skip int
	skips                []skipped
	took                 []timed // top-level tests that passed or failed
}

// timed is one top-level test's run time.
type timed struct {
	pkg, name string
	seconds   float64
}

// slowest is how many of the slowest tests finish lists: where make test's
// time goes, in every run's log.
const slowest = 10

func newSummary(w io.Writer) *summary {
	return &summary{w: w, running: map[string]*test{}}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not JSON (go test prints some errors plainly): pass it on.
			fmt.Fprintln(s.w, sc.Text())
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) event(e event) {
	if e.Test == "" {
		s.packageEvent(e)
		return
	}
	key := e.Package + "\x00" + e.Test
	t := s.running[key]
	if t == nil {
		t = &test{pkg: e.Package, name: e.Test}
		s.running[key] = t
		s.order = append(s.order, t)
	}
	switch e.Action {
	case "output":
		t.out = append(t.out, e.Output)
	case "pass", "fail", "skip":
		t.result = e.Action
		if !strings.Contains(e.Test, "/") {
			if e.Action != "skip" {
				s.took = append(s.took, timed{e.Package, e.Test, e.Elapsed})
			}
			s.topLevelDone(e.Package, e.Test)
		}
	}
}

// packageEvent prints what go test prints for a package (ok, FAIL, build
// errors); at the package's end, tests that never ended (a timeout, a
// crash) are printed with what they wrote.
func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "output", "build-output":
		if e.Output != "PASS\n" {
			io.WriteString(s.w, e.Output)
		}
	case "pass", "fail", "skip":
		s.flush(e.Package, "", e.Action == "fail")
	}
}

// topLevelDone ends a top-level test and its subtests.
func (s *summary) topLevelDone(pkg, name string) {
	s.flush(pkg, name, true)
}

// flush ends the tests of pkg under top (every test of pkg when top is ""),
// printing the output of those that failed or did not end when print.
func (s *summary) flush(pkg, top string, print bool) {
	keep := s.order[:0]
	for _, t := range s.order {
		if t.pkg != pkg || (top != "" && t.name != top && !strings.HasPrefix(t.name, top+"/")) {
			keep = append(keep, t)
			continue
		}
		delete(s.running, pkg+"\x00"+t.name)
		switch t.result {
		case "pass":
			s.passed++
		case "skip":
			s.skip++
			s.skips = append(s.skips, skipped{pkg, t.name, skipReason(t.out)})
		default: // fail, or never ended
			s.failed++
			if print {
				s.printOutput(t)
			}
		}
	}
	clear(s.order[len(keep):])
	s.order = keep
}

// printOutput prints a failed test's output as go test does: its --- FAIL
// line first, then what it logged.
func (s *summary) printOutput(t *test) {
	var rest []string
	for _, line := range t.out {
		switch {
		case isFrame(line):
		case strings.HasPrefix(strings.TrimSpace(line), "--- FAIL"):
			io.WriteString(s.w, line)
		default:
			rest = append(rest, line)
		}
	}
	for _, line := range rest {
		io.WriteString(s.w, line)
	}
}

// isFrame: test2json's === lines, which a plain go test does not print.
func isFrame(line string) bool {
	l := strings.TrimSpace(line)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// fileLine is the "name_test.go:12: " that t.Skip's message starts with.
var fileLine = regexp.MustCompile(`^[\w.-]+\.go:\d+: `)

// skipReason is what the test said when it skipped, on one line.
func skipReason(out []string) string {
	var parts []string
	for _, line := range out {
		l := strings.TrimSpace(line)
		if l == "" || isFrame(line) || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		parts = append(parts, fileLine.ReplaceAllString(l, ""))
	}
	if len(parts) == 0 {
		return "no reason given"
	}
	return strings.Join(parts, " ")
}

// finish prints the slowest tests, the skipped tests and the summary line.
func (s *summary) finish(root bool) {
	s.printSlowest()
	if len(s.skips) > 0 {
		fmt.Fprintf(s.w, "\nskipped (%d):\n", len(s.skips))
		for _, k := range s.skips {
			fmt.Fprintf(s.w, "  %s %s: %s\n", shortPkg(k.pkg), k.name, k.reason)
		}
	}
	fmt.Fprintln(s.w, s.line(root))
}

// printSlowest lists the slowest top-level tests with their seconds, and
// their share of all the tests' seconds.
func (s *summary) printSlowest() {
	if len(s.took) == 0 {
		return
	}
	var total float64
	for _, t := range s.took {
		total += t.seconds
	}
	top := slices.SortedFunc(slices.Values(s.took), func(a, b timed) int { return cmp.Compare(b.seconds, a.seconds) })
	top = top[:min(slowest, len(top))]
	var sum float64
	for _, t := range top {
		sum += t.seconds
	}
	fmt.Fprintf(s.w, "\nslowest %d of %d tests (%.0f s of %.0f s in tests):\n", len(top), len(s.took), sum, total)
	for _, t := range top {
		fmt.Fprintf(s.w, "  %6.1f s  %s %s\n", t.seconds, shortPkg(t.pkg), t.name)
	}
}

// line is the one summary line.
func (s *summary) line(root bool) string {
	head := fmt.Sprintf("tests: %d passed, %d failed, %d skipped", s.passed, s.failed, s.skip)
	if s.skip == 0 {
		return head
	}
	pkgs, needRoot, other := s.why()
	var why, fix []string
	if len(pkgs) > 0 {
		n := 0
		for _, c := range pkgs {
			n += c
		}
		names := strings.Join(slices.Sorted(maps.Keys(pkgs)), " ")
		why = append(why, fmt.Sprintf("%d lack a Debian package: %s", n, names))
		fix = append(fix, "install what every test needs with `sudo make deps` (or only these: sudo apt-get install "+names+")")
	}
	if needRoot > 0 {
		why = append(why, fmt.Sprintf("%d need root", needRoot))
		if !root {
			fix = append(fix, "run the root tests with `sudo make test`")
		}
	}
	if other > 0 {
		why = append(why, fmt.Sprintf("%d for another reason, listed above", other))
	}
	line := head + " (" + strings.Join(why, "; ") + ")"
	if len(fix) > 0 {
		line += "; " + strings.Join(fix, "; ")
	}
	return line
}

// why sorts the skips: by the Debian package they name, root, the rest.
func (s *summary) why() (pkgs map[string]int, needRoot, other int) {
	pkgs = map[string]int{}
	for _, k := range s.skips {
		switch ms := testenv.PackageRe.FindAllStringSubmatch(k.reason, -1); {
		case ms != nil:
			for _, m := range ms {
				pkgs[m[1]] += 0
			}
			pkgs[ms[0][1]]++ // a test counts once, under its first package
		case strings.Contains(k.reason, "requires root"):
			needRoot++
		default:
			other++
		}
	}
	return pkgs, needRoot, other
}

func shortPkg(p string) string {
	return strings.TrimPrefix(p, "github.com/eaddr/eaddr/")
}
