package procroot

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		path, root, rel string
		ok              bool
	}{
		{"/proc/123/root/usr/bin/python3", "/proc/123/root", "usr/bin/python3", true},
		{"/proc/self/root/bin/sh", "/proc/self/root", "bin/sh", true},
		{"/proc/123/root//usr/../bin/sh", "/proc/123/root", "bin/sh", true},
		{"/proc/123/root", "", "", false},
		{"/proc/123/exe", "", "", false},
		{"/proc/abc/root/bin/sh", "", "", false},
		{"/usr/bin/python3", "", "", false},
	} {
		root, rel, ok := Split(tc.path)
		if root != tc.root || rel != tc.rel || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.path, root, rel, ok, tc.root, tc.rel, tc.ok)
		}
	}
}

// TestOpenStaysInRoot: "..", an absolute symlink and a relative one that
// climbs all resolve inside root, never to the host's files.
func TestOpenStaysInRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hostname"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": "/hostname", "climb": "../../../../hostname"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"/hostname", "../../../hostname", "abs", "climb", "/../abs"} {
		fd, err := Open(root, rel, unix.O_RDONLY|unix.O_CLOEXEC)
		if err != nil {
			t.Errorf("Open(%q): %v", rel, err)
			continue
		}
		b := make([]byte, 16)
		n, _ := unix.Read(fd, b)
		unix.Close(fd)
		if string(b[:n]) != "inside" {
			t.Errorf("Open(%q) read %q, want the root's own file", rel, b[:n])
		}
	}
}

// TestProcess: a relative path is taken from the process's cwd, and a mount
// namespace that is not the process's is ESRCH.
func TestProcess(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &st); err != nil {
		t.Skipf("no /proc/self/ns/mnt: %v", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, abs, err := Process(os.Getpid(), uint32(st.Ino), "sock")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(root)
	if want := cwd + "/sock"; abs != want {
		t.Errorf("path %q, want %q", abs, want)
	}
	if _, _, err := Process(os.Getpid(), uint32(st.Ino)+1, "/sock"); err != unix.ESRCH {
		t.Errorf("another mount namespace: %v, want ESRCH", err)
	}
}

// TestReopen: the file reopened is the one the O_PATH descriptor holds,
// even after another file took its path.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path, other := filepath.Join(dir, "bin"), filepath.Join(dir, "other")
	if err := os.WriteFile(path, []byte("held"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("swapped in"), 0o644); err != nil {
		t.Fatal(err)
	}
	pfd, err := Open(dir, "bin", unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	fd, err := Reopen(pfd, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	b := make([]byte, 16)
	if n, _ := unix.Read(fd, b); string(b[:n]) != "held" {
		t.Errorf("reopened %q, want the file the descriptor holds", b[:n])
	}
	if _, err := Open(dir, "bin", unix.O_PATH); Unavailable(err) {
		t.Errorf("openat2 reported unavailable here: %v", err)
	}
}
