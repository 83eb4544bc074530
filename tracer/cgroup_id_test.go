//go:build linux

package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// An event's cgroup id is its task's cgroup v2 id (the directory's inode),
// read by the program through the task's css_set as bpf_get_current_cgroup_id
// does: a process moved into a new cgroup fails bind() there, and its event
// carries that cgroup's id, not its parent's.
func TestEventCgroupID(t *testing.T) {
	testenv.RequireRoot(t)
	python := testenv.Program(t, "python3", "python3")
	dir := filepath.Join(cgroup2Root(t), fmt.Sprintf("eaddr-test-%d", os.Getpid()), "leaf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir); os.Remove(filepath.Dir(dir)) })
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	tr := newTracer(t, Options{Rate: 100})
	script := `import os, socket
open("` + dir + `/cgroup.procs", "w").write(str(os.getpid()))
s = socket.socket()
try: s.bind(("192.0.2.1", 4242))
except OSError: pass
`
	cmd := exec.Command(python, "-c", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	for _, ev := range readAll(t, tr) {
		if int(ev.Tgid) != cmd.Process.Pid {
			continue
		}
		if ev.CgroupId != st.Ino {
			t.Fatalf("the event's cgroup id is %d, the cgroup's %d (%s)", ev.CgroupId, st.Ino, dir)
		}
		return
	}
	t.Fatalf("no event of the python process %d", cmd.Process.Pid)
}
