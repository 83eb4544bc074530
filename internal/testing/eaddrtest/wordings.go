package eaddrtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Placeholder is a part of a template message eaddr cannot know: <ms>,
// <host>, <timestamp>. Other angle brackets (Python's <urlopen error ...>)
// are literal text.
var Placeholder = regexp.MustCompile(`<[A-Za-z_][A-Za-z0-9_]*>`)

// WordingPattern turns a (trimmed) message line into a regexp source.
func WordingPattern(msg string) string {
	var b strings.Builder
	last := 0
	for _, m := range Placeholder.FindAllStringIndex(msg, -1) {
		b.WriteString(regexp.QuoteMeta(msg[last:m[0]]))
		b.WriteString(`.*?`) // <host> may be empty: Go's "listen tcp :8080"
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(msg[last:]))
	return b.String()
}

// JudgeWording compares eaddr's message with what the program printed,
// line by line, both trimmed. A message of several lines must match as many
// consecutive printed lines.
func JudgeWording(msg, printed string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "unknown"
	}
	var lines []string
	for _, l := range strings.Split(printed, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	var pats []string
	for _, l := range strings.Split(msg, "\n") {
		pats = append(pats, WordingPattern(strings.TrimSpace(l)))
	}
	exact := make([]*regexp.Regexp, len(pats))
	for i, p := range pats {
		exact[i] = regexp.MustCompile(`^` + p + `$`)
	}
	for i := 0; i+len(exact) <= len(lines); i++ {
		ok := true
		for j, re := range exact {
			if !re.MatchString(lines[i+j]) {
				ok = false
				break
			}
		}
		if ok {
			return "exact"
		}
	}
	if regexp.MustCompile(strings.Join(pats, `\n`)).MatchString(strings.Join(lines, "\n")) {
		return "contained"
	}
	return "wrong"
}

// BuildGodial builds testdata/clients/godial; "" when go is missing.
func BuildGodial(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	bin := filepath.Join(t.TempDir(), "godial")
	cmd := exec.Command(goBin, "build", "-o", bin, filepath.Join(testenv.Root(), "testdata/clients/godial"))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building godial: %v\n%s", err, out)
	}
	return bin
}
