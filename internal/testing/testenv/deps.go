package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Program returns the path of name on PATH. When it is not there the test
// skips (fails under EADDR_REQUIRE_BPF=1) naming pkg, the Debian package that
// provides it.
func Program(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, pkg)
	}
	return p
}

// Missing skips (fails under EADDR_REQUIRE_BPF=1) because what, a program,
// module or file, is not installed; pkg is the Debian package that installs
// it, and must be listed in .ci/deps.sh (TestSkipPackagesAreListed).
func Missing(t testing.TB, what, pkg string) {
	t.Helper()
	Skip(t, NotInstalled(what, pkg))
}

// NotInstalled is the reason a skip gives for something not installed.
// `make test` (cmd/gotest) groups skips by the package it names, through
// PackageRe.
func NotInstalled(what, pkg string) string {
	return what + " is not installed (Debian package " + pkg + ")"
}

// PackageRe finds the Debian package in a reason NotInstalled made.
var PackageRe = regexp.MustCompile(`\(Debian package ([a-z0-9][a-z0-9.+-]*)\)`)

// DepsScript is the path of .ci/deps.sh, the one list of the Debian packages
// the tests need (`sudo make deps`; .ci/run calls it).
func DepsScript() string {
	return filepath.Join(Root(), ".ci", "deps.sh")
}

// Root is the repository's root directory, wherever the test runs: the
// tests read its README, docs, deploy/ and testdata/ from there.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// DepsPackages reads the packages .ci/deps.sh installs: the words of its
// `packages=( ... )` array, comments left out.
func DepsPackages(t testing.TB) map[string]bool {
	t.Helper()
	f, err := os.Open(DepsScript())
	if err != nil {
		t.Fatalf("the list of test dependencies: %v", err)
	}
	defer f.Close()
	pkgs := map[string]bool{}
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "packages=(":
			in = true
		case in && line == ")":
			in = false
		case in && !strings.HasPrefix(line, "#"):
			for _, w := range strings.Fields(line) {
				pkgs[w] = true
			}
		}
	}
	if err := s.Err(); err != nil || len(pkgs) == 0 {
		t.Fatalf("%s: no packages=( ... ) list read (%v)", DepsScript(), err)
	}
	return pkgs
}
