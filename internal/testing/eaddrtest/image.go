package eaddrtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"golang.org/x/sys/unix"
)

// ImageRef is the name the test gives the image in its private containerd.
const ImageRef = "localhost/eaddr:image-test"

// BuildImageArchive runs `make image` (the same build CI and a release use)
// into the test's temporary directory and returns the OCI archive.
func BuildImageArchive(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.Program(t, "buildah", "buildah")
	testenv.Program(t, "make", "make")
	root := testenv.Root()
	archive := filepath.Join(t.TempDir(), "eaddr-image.tar")
	begin := time.Now()
	cmd := exec.Command("make", "-C", root, "--no-print-directory", "image",
		"IMAGE_ARCHIVE="+archive, "VERSION=image-test")
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Dir(archive))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image in %v:\n%s", time.Since(begin).Round(time.Millisecond), strings.TrimSpace(string(out)))
	return archive
}

// NodeMounts are the host paths the DaemonSet mounts. /proc is the
// container's own, which in the host PID namespace shows every process of
// the node.
//
//   - /sys/fs/cgroup (read-only) is needed: the container's own cgroup
//     mount shows only its own subtree (cgroup v1 and hybrid hosts) or its
//     own cgroup namespace (v2, unprivileged), so without the node's
//     hierarchy events carry no cgroup path and hence no pod.
//   - /sys/kernel/tracing (tracefs) is needed without CAP_SYS_ADMIN: eaddr
//     mounts tracefs itself where none is mounted, which needs it.
//   - /sys/kernel/btf (read-only) is not needed (the container's sysfs
//     shows it), but states the dependency.
var NodeMounts = []critest.Mount{
	{HostPath: "/sys/kernel/btf", ContainerPath: "/sys/kernel/btf", ReadOnly: true},
	{HostPath: "/sys/fs/cgroup", ContainerPath: "/sys/fs/cgroup", ReadOnly: true},
	{HostPath: "/sys/kernel/tracing", ContainerPath: "/sys/kernel/tracing"},
}

// FailBindOnHost makes one failure on the host, from this process: bind()
// to 192.0.2.1:4242 (TEST-NET-1, on no interface) fails with EADDRNOTAVAIL
// without sending anything.
func FailBindOnHost(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = unix.Bind(fd, &unix.SockaddrInet4{Port: 4242, Addr: [4]byte{192, 0, 2, 1}})
	if err != unix.EADDRNOTAVAIL {
		t.Fatalf("bind 192.0.2.1:4242: %v, want EADDRNOTAVAIL", err)
	}
}

// AgentCapabilities are what `eaddr trace` needs when not privileged
// (Kubernetes spells them without "CAP_": containerd prefixes each name
// with CAP_ and runc silently drops an unknown CAP_CAP_BPF):
//
//   - BPF, PERFMON: load the programs and the ring buffer, attach to the
//     syscall tracepoints, read kernel memory from BPF. SYS_ADMIN, needed
//     below, grants both too; they are listed so that the set still loads
//     the programs if SYS_ADMIN is dropped along with the diagnosis
//     (--diagnose=false);
//   - SYS_ADMIN: setns() into the failing netns for its diagnosis (even the
//     host's own), without which every event says "no diagnosis: ... setns
//     ... operation not permitted";
//   - SYS_PTRACE: /proc/PID/exe, /proc/PID/root, /proc/PID/ns/net and the
//     /proc/PID/fd links of other processes (ptrace read access: every
//     process of another user, or with capabilities the agent lacks);
//     without it the explanation loses the runtime, and the diagnosis of a
//     netns other than the agent's fails ("open /proc/PID/ns/net:
//     permission denied");
//   - DAC_READ_SEARCH: list /proc/PID/fd of processes of other users (mode
//     0500) to name the holders of the sockets.
//
// Not needed: SYS_RESOURCE (RLIMIT_MEMLOCK; BPF memory is charged to the
// memory cgroup since Linux 5.11, and eaddr needs 5.15), NET_ADMIN
// (sock_diag dumps and address lists need no capability).
var AgentCapabilities = []string{"BPF", "PERFMON", "SYS_ADMIN", "SYS_PTRACE", "DAC_READ_SEARCH"}
