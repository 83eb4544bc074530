package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// CompileC builds the C file src with the compiler cc (installed by the
// Debian package pkg; if missing, Missing) into bin, flags before the
// others, and returns bin. A compile error fails the test with the
// compiler's words.
func CompileC(t testing.TB, cc, pkg, bin, src string, flags ...string) string {
	t.Helper()
	path := Program(t, cc, pkg)
	args := append(append([]string{}, flags...), "-O2", "-o", bin, src)
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
	}
	return bin
}

// CompileCSource is CompileC of the C source code, written to bin + ".c".
func CompileCSource(t testing.TB, cc, pkg, bin, code string, flags ...string) string {
	t.Helper()
	src := bin + ".c"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return CompileC(t, cc, pkg, bin, src, flags...)
}
