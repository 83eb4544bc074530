package explain

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/procroot"
)

// binTools: the Debian package of each tool the tests run.
var binTools = map[string]string{"busybox": "busybox-static", "gcc": "gcc", "musl-gcc": "musl-tools"}

// binLookTool returns the path of a tool, skipping the test (failing under
// EADDR_REQUIRE_BPF=1) when it is not installed. go, and coreutils' sleep,
// are not in binTools: the one comes with Go, the other with every system.
func binLookTool(t testing.TB, name string) string {
	t.Helper()
	if pkg, ok := binTools[name]; ok {
		return testenv.Program(t, name, pkg)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Skip(t, name+" is not on PATH: "+err.Error())
	}
	return p
}

// analyze runs analyzeBinaryPath and fails the test on error.
func binAnalyze(t *testing.T, path string) BinaryInfo {
	t.Helper()
	info, err := analyzeBinaryPath(path)
	if err != nil {
		t.Fatalf("analyzeBinaryPath(%s): %v", path, err)
	}
	t.Logf("%s: %+v", path, info)
	return info
}

// binCheckInfo compares the fields that a test pins down; GoVersion is only
// checked for being set when Runtime is "go".
func binCheckInfo(t *testing.T, path string, got, want BinaryInfo) {
	t.Helper()
	if got.Runtime != want.Runtime || got.Libc != want.Libc || got.Static != want.Static || got.Name != want.Name {
		t.Errorf("analyzeBinaryPath(%s) = Runtime %q Libc %q Static %v Name %q; want Runtime %q Libc %q Static %v Name %q",
			path, got.Runtime, got.Libc, got.Static, got.Name, want.Runtime, want.Libc, want.Static, want.Name)
	}
	if got.Static != (got.Interp == "") {
		t.Errorf("analyzeBinaryPath(%s): Static %v but Interp %q", path, got.Static, got.Interp)
	}
	if (got.Runtime == runtimeGo) != (got.GoVersion != "") {
		t.Errorf("analyzeBinaryPath(%s): Runtime %q but GoVersion %q", path, got.Runtime, got.GoVersion)
	}
}

func TestAnalyzeBinaryCurl(t *testing.T) {
	const path = "/usr/bin/curl"
	if _, err := os.Stat(path); err != nil {
		testenv.Missing(t, path, "curl")
	}
	got := binAnalyze(t, path)
	binCheckInfo(t, path, got, BinaryInfo{Runtime: runtimeC, Libc: libcGlibc, Name: "curl"})
	if !strings.Contains(got.Interp, "ld-linux") {
		t.Errorf("Interp = %q, want glibc's ld-linux", got.Interp)
	}
}

// TestAnalyzeBinaryBusyBox expects Debian's busybox-static: a static glibc
// program whose .rodata holds both its banner and glibc's strerror table.
func TestAnalyzeBinaryBusyBox(t *testing.T) {
	path := binLookTool(t, "busybox")
	got := binAnalyze(t, path)
	binCheckInfo(t, path, got, BinaryInfo{Runtime: runtimeBusyBox, Libc: libcGlibc, Static: true, Name: "busybox"})

	// The banner alone identifies BusyBox, whatever the file is called.
	link := filepath.Join(t.TempDir(), "sh")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err = analyzeBinaryFile(f, "sh")
	if err != nil {
		t.Fatal(err)
	}
	binCheckInfo(t, link, got, BinaryInfo{Runtime: runtimeBusyBox, Libc: libcGlibc, Static: true, Name: "sh"})
}

// TestAnalyzeBinaryPython3 resolves Debian's /usr/bin/python3 symlink to
// python3.11 (or whichever 3.N is installed).
func TestAnalyzeBinaryPython3(t *testing.T) {
	const path = "/usr/bin/python3"
	if _, err := os.Stat(path); err != nil {
		testenv.Missing(t, path, "python3")
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	want := BinaryInfo{Runtime: runtimePython, Libc: libcGlibc, Name: filepath.Base(resolved)}
	got := binAnalyze(t, path)
	binCheckInfo(t, path, got, want)
	if !strings.HasPrefix(got.Name, "python3.") {
		t.Errorf("Name = %q, want python3.N (symlink resolved)", got.Name)
	}

	// The same file seen through /proc/PID/root goes through openat2
	// (RESOLVE_IN_ROOT).
	proc := "/proc/self/root" + path
	binCheckInfo(t, proc, binAnalyze(t, proc), want)
}

// binBuildGo builds a tiny Go program into dir and returns its path.
func binBuildGo(t testing.TB, dir, src string, cgo bool) string {
	t.Helper()
	goTool := binLookTool(t, "go")
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "prog")
	cmd := exec.Command(goTool, "build", "-o", out, "main.go")
	cmd.Dir = dir
	cgoEnabled := "CGO_ENABLED=0"
	if cgo {
		cgoEnabled = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgoEnabled, "GOTOOLCHAIN=local", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// binWithoutSectionHeaders writes a copy of the ELF64 file at path with its
// section header table dropped from the ELF header (e_shoff, e_shnum and
// e_shstrndx zeroed), as sstrip does, and returns the copy's path.
func binWithoutSectionHeaders(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 64 || string(data[:4]) != "\x7fELF" || data[4] != 2 {
		t.Fatalf("%s: not an ELF64 file", path)
	}
	clear(data[0x28:0x30]) // e_shoff
	clear(data[0x3c:0x40]) // e_shnum, e_shstrndx
	out := filepath.Join(t.TempDir(), filepath.Base(path)+"-nosections")
	if err := os.WriteFile(out, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnalyzeBinaryGo(t *testing.T) {
	const src = `package main

import (
	"fmt"
	"net"
)

func main() {
	_, err := net.Dial("tcp", "192.0.2.1:1")
	fmt.Println(err)
}
`
	t.Run("static", func(t *testing.T) {
		path := binBuildGo(t, t.TempDir(), src, false)
		got := binAnalyze(t, path)
		binCheckInfo(t, path, got, BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Static: true, Name: "prog"})
		if got.GoVersion != runtime.Version() {
			t.Errorf("GoVersion = %q, want %q", got.GoVersion, runtime.Version())
		}

		// Name follows symlinks: a link called "python3" is still a Go
		// program named prog.
		link := filepath.Join(t.TempDir(), "python3")
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		binCheckInfo(t, link, binAnalyze(t, link), BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Static: true, Name: "prog"})

		// debug/buildinfo also finds a Go program with no section headers.
		noSec := binWithoutSectionHeaders(t, path)
		binCheckInfo(t, noSec, binAnalyze(t, noSec), BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Static: true, Name: filepath.Base(noSec)})
	})
	t.Run("cgo", func(t *testing.T) {
		binLookTool(t, "gcc")
		path := binBuildGo(t, t.TempDir(), src, true)
		got := binAnalyze(t, path)
		// Dynamic (glibc's ld-linux) yet Go's own errno wording.
		binCheckInfo(t, path, got, BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Static: false, Name: "prog"})
	})
}

// TestAnalyzeBinaryTestBinary analyses this test binary (a Go program) by
// its absolute path (not os.Args[0]: make test-race starts it as
// ./race.test, and a path is resolved beneath a root, as the kernel
// recorded it) and through the kernel's /proc/self/exe link.
func TestAnalyzeBinaryTestBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{exe, "/proc/self/exe"} {
		got := binAnalyze(t, path)
		binCheckInfo(t, path, got, BinaryInfo{Runtime: runtimeGo, Libc: libcGo, Static: got.Static, Name: filepath.Base(exe)})
		if got.GoVersion != runtime.Version() {
			t.Errorf("%s: GoVersion = %q, want %q", path, got.GoVersion, runtime.Version())
		}
	}
}

// binCProgram prints strerror(EADDRNOTAVAIL), the text the libc detection keys
// on.
const binCProgram = `#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(void) {
	puts(strerror(EADDRNOTAVAIL));
	return 0;
}
`

func TestAnalyzeBinaryC(t *testing.T) {
	src := filepath.Join(t.TempDir(), "prog.c")
	if err := os.WriteFile(src, []byte(binCProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cc       string
		args     []string
		libc     Libc
		static   bool
		strerror string // what the program prints
	}{
		{"gcc", "gcc", nil, libcGlibc, false, string(glibcEADDRNOTAVAIL)},
		{"gcc-static", "gcc", []string{"-static"}, libcGlibc, true, string(glibcEADDRNOTAVAIL)},
		{"musl-gcc", "musl-gcc", nil, libcMusl, false, string(muslEADDRNOTAVAIL)},
		{"musl-gcc-static", "musl-gcc", []string{"-static"}, libcMusl, true, string(muslEADDRNOTAVAIL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := binLookTool(t, tc.cc)
			out := filepath.Join(t.TempDir(), tc.name)
			args := append(append([]string{}, tc.args...), "-O2", "-o", out, src)
			if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v\n%s", tc.cc, args, err, b)
			}
			got := binAnalyze(t, out)
			binCheckInfo(t, out, got, BinaryInfo{Runtime: runtimeC, Libc: tc.libc, Static: tc.static, Name: tc.name})
			if tc.static {
				// Without section headers the whole file is searched.
				noSec := binWithoutSectionHeaders(t, out)
				binCheckInfo(t, noSec, binAnalyze(t, noSec), BinaryInfo{Runtime: runtimeC, Libc: tc.libc, Static: true, Name: filepath.Base(noSec)})
			}

			// The classification names the wording the program really
			// prints. (A dynamic musl program needs musl's loader.)
			if _, err := os.Stat(got.Interp); got.Static || err == nil {
				b, err := exec.Command(out).Output()
				if err != nil {
					t.Fatalf("running %s: %v", out, err)
				}
				if s := strings.TrimSpace(string(b)); s != tc.strerror {
					t.Errorf("%s prints %q, want %q", tc.name, s, tc.strerror)
				}
			}
		})
	}
}

func TestAnalyzeBinaryNotELF(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("\x7fE"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("\x7fELF garbage that is not an ELF header"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{script, short, bad, dir} {
		info, err := analyzeBinaryPath(path)
		if !errors.Is(err, errNotELF) {
			t.Errorf("analyzeBinaryPath(%s) = %+v, %v; want an error wrapping errNotELF", path, info, err)
			continue
		}
		t.Logf("%s: %v", filepath.Base(path), err)
	}
	if _, err := analyzeBinaryPath(script); err == nil || !strings.Contains(err.Error(), "script") {
		t.Errorf("error for a script should say so, got %v", err)
	}
}

func TestAnalyzeBinaryMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing")
	if _, err := analyzeBinaryPath(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("analyzeBinaryPath(missing) error = %v, want os.ErrNotExist", err)
	}
	if _, err := analyzeBinaryPath("/proc/self/root" + path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("analyzeBinaryPath(/proc/self/root/missing) error = %v, want os.ErrNotExist", err)
	}
}

// TestAnalyzeBinaryFileOffset checks that analyzeBinaryFile neither moves nor
// closes the caller's file, and that a path-like name is reduced to its base.
func TestAnalyzeBinaryFileOffset(t *testing.T) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := analyzeBinaryFile(f, "/usr/local/bin/thing (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runtime != runtimeGo || got.Name != "thing" {
		t.Errorf("got Runtime %q Name %q, want go, thing", got.Runtime, got.Name)
	}
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 3 {
		t.Errorf("offset after analyzeBinaryFile = %d, %v; want 3", off, err)
	}
	// Empty name: taken from the file itself (the test binary).
	exe, _ := os.Executable()
	if got, err := analyzeBinaryFile(f, ""); err != nil || got.Name != filepath.Base(exe) {
		t.Errorf("analyzeBinaryFile(f, \"\") = Name %q, %v; want %q", got.Name, err, filepath.Base(exe))
	}
}

// TestAnalyzeBinaryProcExeDeleted analyses another process through
// /proc/PID/exe after its executable was unlinked: the file is still readable
// through the link, and the kernel's " (deleted)" suffix is dropped from Name.
func TestAnalyzeBinaryProcExeDeleted(t *testing.T) {
	sleep := binLookTool(t, "sleep")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "mysleep")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	path := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"
	want, err := analyzeBinaryPath(sleep)
	if err != nil {
		t.Fatal(err)
	}
	want.Name = "mysleep"
	got := binAnalyze(t, path)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("analyzeBinaryPath(%s) = %+v, want %+v", path, got, want)
	}
}

// TestBinaryOpenInRootAbsoluteSymlink: under /proc/PID/root an absolute symlink
// must resolve inside that root, not on the host.
func TestBinaryOpenInRootAbsoluteSymlink(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "eaddr-test-bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "eaddr-test-bin", "real"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/eaddr-test-bin/real", filepath.Join(root, "eaddr-test-bin", "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := procroot.Open(root, "eaddr-test-bin/link", unix.O_RDONLY|unix.O_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("openat2 unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("procroot.Open: %v", err)
	}
	f := os.NewFile(uintptr(fd), "link")
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "inside" {
		t.Errorf("read %q, %v; want %q", b, err, "inside")
	}
	if got := openedName(f, "link"); got != "real" {
		t.Errorf("openedName = %q, want real", got)
	}
}

func TestBinaryInterpreterByName(t *testing.T) {
	for name, want := range map[string]string{
		"python": runtimePython, "python3": runtimePython, "python3.11": runtimePython,
		"python3.13t": runtimePython, "python2.7": runtimePython,
		"java": runtimeJava, "node": runtimeNode, "nodejs": runtimeNode,
		"perl": runtimePerl, "perl5.36.0": runtimePerl, "perl5.36": runtimePerl,
		"ruby": runtimeRuby, "ruby3.1": runtimeRuby,
		"python3-config": "", "pythonista": "", "javac": "", "perldoc": "",
		"rubyx": "", "ruby3.": "", "curl": "", "busybox": "", "": "",
	} {
		if got := interpreterByName(name); got != want {
			t.Errorf("interpreterByName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestBinaryLibcFromInterp(t *testing.T) {
	for interp, want := range map[string]Libc{
		"/lib64/ld-linux-x86-64.so.2":                      libcGlibc,
		"/lib/ld-linux-aarch64.so.1":                       libcGlibc,
		"/lib/ld-linux-armhf.so.3":                         libcGlibc,
		"/lib64/ld64.so.2":                                 libcGlibc,
		"/nix/store/x-glibc-2.38/lib/ld-linux-x86-64.so.2": libcGlibc,
		"/lib/ld-musl-x86_64.so.1":                         libcMusl,
		"/lib/ld-musl-aarch64.so.1":                        libcMusl,
		"/system/bin/linker64":                             LibcUnknown,
		"/lib/ld-uClibc.so.0":                              LibcUnknown,
	} {
		if got := libcFromInterp(interp); got != want {
			t.Errorf("libcFromInterp(%q) = %q, want %q", interp, got, want)
		}
	}
}

// TestBinaryScanSpansBoundary checks that a needle straddling a chunk boundary, or
// lying past the budget or outside the spans, is handled.
func TestBinaryScanSpansBoundary(t *testing.T) {
	data := bytes.Repeat([]byte{'x'}, 3*scanChunk)
	needle := []byte("Address not available")
	copy(data[scanChunk-5:], needle) // straddles the first boundary
	other := []byte("BusyBox v")
	copy(data[2*scanChunk+100:], other)
	r := bytes.NewReader(data)

	found, err := scanSpans(r, []fileSpan{{0, int64(len(data))}}, [][]byte{needle, other}, maxScanBytes)
	if err != nil || !found[0] || !found[1] {
		t.Errorf("whole data: found %v, %v; want both", found, err)
	}
	found, _ = scanSpans(r, []fileSpan{{0, int64(len(data))}}, [][]byte{needle, other}, 2*scanChunk)
	if !found[0] || found[1] {
		t.Errorf("budget 2 chunks: found %v; want only the first", found)
	}
	found, _ = scanSpans(r, []fileSpan{{int64(scanChunk), int64(2 * scanChunk)}}, [][]byte{needle, other}, maxScanBytes)
	if found[0] || !found[1] {
		t.Errorf("span after the first: found %v; want only the second", found)
	}
	// A span running past the end of the data ends at EOF.
	found, err = scanSpans(r, []fileSpan{{int64(2 * scanChunk), int64(10 * scanChunk)}}, [][]byte{other}, maxScanBytes)
	if err != nil || !found[0] {
		t.Errorf("span past EOF: found %v, %v", found, err)
	}
}

// TestBinToolsListed: the packages binLookTool names are the ones
// `sudo make deps` installs.
func TestBinToolsListed(t *testing.T) {
	listed := testenv.DepsPackages(t)
	for tool, pkg := range binTools {
		if !listed[pkg] {
			t.Errorf("%s: Debian package %s is not in .ci/deps.sh", tool, pkg)
		}
	}
}

func benchmarkAnalyzeBinary(b *testing.B, path, pkg string) {
	if _, err := os.Stat(path); err != nil {
		testenv.Missing(b, path, pkg)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := analyzeBinaryPath(path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnalyzeBinaryBusyBox(b *testing.B) {
	benchmarkAnalyzeBinary(b, "/usr/bin/busybox", "busybox-static")
}
func BenchmarkAnalyzeBinaryPython3(b *testing.B) {
	benchmarkAnalyzeBinary(b, "/usr/bin/python3", "python3")
}
func BenchmarkAnalyzeBinaryCurl(b *testing.B) { benchmarkAnalyzeBinary(b, "/usr/bin/curl", "curl") }

// A native program's linked libraries are read (DT_NEEDED), and a Go
// program's main package (its build info).
func TestBinaryNeededAndGoPath(t *testing.T) {
	curl := testenv.Program(t, "curl", "curl")
	info := binAnalyze(t, curl)
	if !linksAny(info.Needed, []string{"libcurl"}) || !linksAny(info.Needed, []string{"libc.so"}) {
		t.Errorf("curl needs %q, want libcurl and libc among them", info.Needed)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if info := binAnalyze(t, self); info.Runtime != runtimeGo || info.GoPath != "github.com/eaddr/eaddr/explain.test" || info.Needed != nil {
		t.Errorf("this test binary: runtime %q, Go path %q, needed %q", info.Runtime, info.GoPath, info.Needed)
	}
}
