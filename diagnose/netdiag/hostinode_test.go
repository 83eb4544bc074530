package netdiag

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestHostInode: pid 1's netns when it can be read; else a kernel thread's
// (pid 2, kthreadd: always the initial namespace); else an error, never
// eaddr's own netns (in a pod without hostNetwork, the pod's: a NodePort
// check on it reported nothing, without a word, on the cluster tier).
func TestHostInode(t *testing.T) {
	const kthread = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n" // flags 0x208040: PF_KTHREAD
	const user = "2 (sleep) S 1 2 2 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n"       // flags 0x400100
	for _, c := range []struct {
		name        string
		pid1, pid2  string // the ns/net link targets; "" for none (unreadable)
		stat2       string
		want        uint64
		wantErrPart string
	}{
		{"pid 1 readable", "net:[11]", "net:[22]", kthread, 11, ""},
		{"pid 1 hidden, pid 2 kthreadd", "", "net:[22]", kthread, 22, ""},
		{"pid 1 hidden, pid 2 a pod's process", "", "net:[22]", user, 0, "pid 2 is no kernel thread"},
		{"pid 1 hidden, pid 2 gone", "", "", "", 0, "pid 2 is no kernel thread"},
	} {
		t.Run(c.name, func(t *testing.T) {
			proc := t.TempDir()
			for pid, target := range map[string]string{"1": c.pid1, "2": c.pid2} {
				if err := os.MkdirAll(filepath.Join(proc, pid, "ns"), 0o755); err != nil {
					t.Fatal(err)
				}
				if target != "" {
					if err := os.Symlink(target, filepath.Join(proc, pid, "ns", "net")); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.stat2 != "" {
				if err := os.WriteFile(filepath.Join(proc, "2", "stat"), []byte(c.stat2), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := hostInode(proc)
			if c.wantErrPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErrPart) {
					t.Errorf("got %d, %v; want an error saying %q", got, err, c.wantErrPart)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
	// This machine: the answer is the initial namespace, kthreadd's.
	testenv.RequireRoot(t)
	host, err := HostInode()
	init, err2 := nsInode("/proc/2/ns/net")
	if err != nil || err2 != nil || host != init {
		t.Errorf("HostInode() = %d, %v; kthreadd's netns %d, %v", host, err, init, err2)
	}
}
