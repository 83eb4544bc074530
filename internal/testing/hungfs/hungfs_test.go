package hungfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A process runs from the file system and reads it while this test's own
// read hangs, until Release answers it.
func TestHangsOneProcess(t *testing.T) {
	testenv.RequireRoot(t)
	bb, err := os.ReadFile(testenv.Program(t, "busybox", "busybox-static"))
	if err != nil {
		t.Fatal(err)
	}
	h := Mount(t, map[string][]byte{"bin/busybox": bb, "data": []byte("content")})
	h.HangFor(os.Getpid())
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(filepath.Join(h.Dir, "data"))
		if err != nil {
			t.Error(err)
		}
		got <- string(b)
	}()
	for deadline := time.Now().Add(time.Minute); h.Hung() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("this test's read did not reach the daemon in a minute")
		}
	}
	argv := Argv(filepath.Join(h.Dir, "bin/busybox"), "cat", filepath.Join(h.Dir, "data"))
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || string(out) != "content" {
		t.Errorf("another process ran from it and read %q, %v; want content", out, err)
	}
	select {
	case s := <-got:
		t.Fatalf("the hung read returned %q before Release", s)
	default:
	}
	h.Release()
	if s := <-got; s != "content" {
		t.Errorf("after Release the read returned %q", s)
	}
}
