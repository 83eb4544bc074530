package eaddrtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Cgroup2Mount finds the cgroup v2 mount from mountinfo (hybrid hosts have
// it at /sys/fs/cgroup/unified, pure v2 hosts at /sys/fs/cgroup).
func Cgroup2Mount(t *testing.T) string {
	t.Helper()
	mounts, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.MountPoint
		}
	}
	testenv.Skip(t, "no cgroup2 mount")
	return ""
}

// PodCgroup makes a kubepods-style cgroup (cgroupfs layout) with a random
// pod UID and container ID under the cgroup2 mount, removed at cleanup.
func PodCgroup(t *testing.T) (root, leaf, uid, cid string) {
	t.Helper()
	root = Cgroup2Mount(t)
	uid, cid = RandomUID(), RandomHex(32)
	top := filepath.Join(root, "eaddr-test-"+cid[:8])
	leaf = filepath.Join(top, "kubepods", "besteffort", "pod"+uid, cid)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Deepest first; the processes moved in have exited by now.
		for d := leaf; strings.HasPrefix(d, top); d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	return root, leaf, uid, cid
}

// RandomHex is n random bytes in hex: a container ID for n = 32.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// RandomUID is a random pod UID (8-4-4-4-12 hex digits).
func RandomUID() string {
	h := RandomHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// FailInCgroup runs a python client in ns, moves it into the cgroup leaf,
// then lets it fail to connect to 127.0.0.1:8080; it returns its pid.
func FailInCgroup(t *testing.T, ns *netns.NS, leaf string) int {
	t.Helper()
	return ConnectInCgroup(t, ns, leaf, 8080)
}

// ConnectInCgroup is failInCgroup toward 127.0.0.1:port.
func ConnectInCgroup(t *testing.T, ns *netns.NS, leaf string, port int) int {
	t.Helper()
	cmd := exec.Command(Python(t), "-c", fmt.Sprintf(`import socket, sys
sys.stdin.readline()
try:
    socket.socket().connect(("127.0.0.1", %d))
except OSError as e:
    print(e)
`, port))
	pid := StartInCgroup(t, ns, leaf, cmd)
	cmd.Wait()
	return pid
}

// StartInCgroup starts cmd in ns, where it waits for a line on stdin, moves
// it into the cgroup leaf, then sends it the line; it returns the pid. The
// caller waits for cmd; a cmd left running is killed at cleanup.
func StartInCgroup(t *testing.T, ns *netns.NS, leaf string, cmd *exec.Cmd) int {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatalf("moving pid %d into %s: %v", cmd.Process.Pid, leaf, err)
	}
	io.WriteString(stdin, "go\n")
	return cmd.Process.Pid
}

// DeadSocket is a unix socket nobody listens on, as a runtime's is while the
// runtime is down: --cri-endpoint takes it (a missing path is a usage
// error), and every request to it fails.
func DeadSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	return path
}

// RmdirRetry removes a cgroup directory, retrying on EBUSY (the kernel may
// still be tearing down a just-reaped task, later on a busy machine) for up
// to 30 s.
func RmdirRetry(dir string) error {
	var err error
	for range 3000 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}
