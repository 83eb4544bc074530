package explain

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func TestStrerror(t *testing.T) {
	tests := []struct {
		libc Libc
		n    int
		want string // "" means no text (ok == false)
	}{
		{libcGlibc, 98, "Address already in use"},
		{libcMusl, 98, "Address in use"},
		{libcGo, 98, "address already in use"},
		{libcGlibc, 99, "Cannot assign requested address"},
		{libcMusl, 99, "Address not available"},
		{libcGo, 99, "cannot assign requested address"},
		{libcGlibc, 111, "Connection refused"},
		{libcMusl, 111, "Connection refused"},
		{libcGo, 111, "connection refused"},
		{libcGlibc, 110, "Connection timed out"},
		{libcMusl, 110, "Operation timed out"},
		{libcGo, 110, "connection timed out"},
		{libcGlibc, 1, "Operation not permitted"},
		{libcMusl, 1, "Operation not permitted"},
		{libcGo, 1, "operation not permitted"},
		{libcGlibc, 133, "Memory page has hardware error"},
		{libcMusl, 133, ""}, // musl has no text for EHWPOISON
		// 41 is not an errno on Linux: every table leaves it empty.
		{libcGlibc, 41, ""},
		{libcMusl, 41, ""},
		{libcGo, 41, ""},
		{LibcUnknown, 98, ""},
		{Libc("uclibc"), 98, ""},
	}
	for _, libc := range []Libc{libcGlibc, libcMusl, libcGo, LibcUnknown} {
		for _, n := range []int{-1, 0, 134, 200, 1 << 20} {
			tests = append(tests, struct {
				libc Libc
				n    int
				want string
			}{libc, n, ""})
		}
	}
	for _, tt := range tests {
		got, ok := strerror(tt.libc, tt.n)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("strerror(%q, %d) = %q, %v; want %q, %v", tt.libc, tt.n, got, ok, tt.want, tt.want != "")
		}
	}
}

func TestStrerrorTables(t *testing.T) {
	for name, n := range map[string]int{"glibc": len(glibcStrerror), "musl": len(muslStrerror), "go": len(goStrerror)} {
		if n > strerrorMax+1 {
			t.Errorf("%s table has %d entries, more than errnos 0..%d", name, n, strerrorMax)
		}
	}
	for n := 1; n <= strerrorMax; n++ {
		for _, libc := range []Libc{libcGlibc, libcMusl} {
			if s, _ := strerror(libc, n); strings.Contains(s, "Unknown error") || s == "No error information" {
				t.Errorf("strerror(%q, %d) = placeholder %q; the generator should have left it empty", libc, n, s)
			}
		}
	}
}

// TestStrerrorGoMatchesGlibc checks that Go's table is glibc's wording in
// lower case for the errnos eaddr cares most about. (Go's table differs from
// glibc's for a few other errnos, so this does not check every n.)
func TestStrerrorGoMatchesGlibc(t *testing.T) {
	for _, n := range []int{decode.EADDRINUSE, decode.EADDRNOTAVAIL, int(syscall.ECONNREFUSED)} {
		g, gok := strerror(libcGlibc, n)
		o, ook := strerror(libcGo, n)
		if !gok || !ook || !strings.EqualFold(g, o) {
			t.Errorf("errno %d: glibc %q (%v), go %q (%v); want the same words up to case", n, g, gok, o, ook)
			continue
		}
		if o != strings.ToLower(o[:1])+o[1:] {
			t.Errorf("errno %d: go text %q does not start in lower case", n, o)
		}
	}
}

func TestStrerrorAllocs(t *testing.T) {
	libcs := []Libc{libcGlibc, libcMusl, libcGo, LibcUnknown}
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		for _, libc := range libcs {
			for n := -1; n <= strerrorMax+2; n++ {
				s, _ := strerror(libc, n)
				sink += len(s)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("strerror allocates %v times per run, want 0", allocs)
	}
	_ = sink
}

// TestStrerrorGenerated checks that strerror_glibc.go and strerror_musl.go are
// what the generator writes today. It needs gcc and musl-gcc (Debian package
// musl-tools).
//
// The files record which glibc and musl produced them. When this host has
// the same versions the files must match byte for byte. When it has other
// versions, the tables must still match; if they do not, the test reports
// the differences and skips, since the committed files then describe another
// libc release rather than being stale.
func TestStrerrorGenerated(t *testing.T) {
	testenv.Program(t, "gcc", "gcc")
	testenv.Program(t, "musl-gcc", "musl-tools")
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skip(t, "go is not on PATH: it regenerates the strerror tables")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/strerrorgen", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/strerrorgen -out %s: %v\n%s", dir, err, out)
	}
	for _, name := range []string{"strerror_glibc.go", "strerror_musl.go"} {
		t.Run(name, func(t *testing.T) { compareGenerated(t, name, filepath.Join(dir, name)) })
	}
}

// compareGenerated checks the committed generated file name against fresh,
// the generator's output on this host. Files that record another release
// of their source ("// Produced by ...") than this host's only log their
// differences, and skip.
func compareGenerated(t *testing.T, name, fresh string) {
	t.Helper()
	committedSrc, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	freshSrc, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(committedSrc, freshSrc) {
		return
	}
	cv, crest := splitProducedBy(committedSrc)
	fv, frest := splitProducedBy(freshSrc)
	diff := firstDiff(crest, frest)
	switch {
	case cv == fv:
		t.Errorf("%s is out of date; run go generate ./explain\n%s", name, diff)
	case bytes.Equal(crest, frest):
		t.Logf("%s was generated from another release (%q, here %q); the tables are identical", name, cv, fv)
	default:
		t.Logf("%s was generated from another release (%q, here %q) and the tables differ:\n%s", name, cv, fv, diff)
		t.Skipf("%s describes another release than this host's; regenerate on a host with the recorded versions to check it", name)
	}
}

// splitProducedBy returns the "// Produced by ..." line, which records the libc
// version, and the file without it.
func splitProducedBy(src []byte) (string, []byte) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("// Produced by ")) {
			rest := bytes.Join(append(lines[:i:i], lines[i+1:]...), nil)
			return string(bytes.TrimSpace(l)), rest
		}
	}
	return "", src
}

// firstDiff describes the first line where a and b differ.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("first difference at line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return "(no line differs)"
}
