package pod

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/tracer"
)

// fakeClock is a manually advanced clock for the rate-limit tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func inodeOf(t testing.TB, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// Recorded mountinfo excerpts.
const (
	// Hybrid layout (this VM): v1 controllers plus cgroup2 at .../unified.
	mountinfoHybrid = `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// Pure v2 (systemd default), with optional shared: fields.
	mountinfoPureV2 = `24 31 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 31 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw,size=8131244k,nr_inodes=2032811,mode=755
31 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
36 24 0:31 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw
`
	// Mount point containing a space, escaped by the kernel as \040, and
	// several optional fields before the separator.
	mountinfoEscaped = `31 1 259:2 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
80 31 0:40 / /mnt/my\040cgroups rw,relatime shared:40 master:3 - cgroup2 none rw
`
	// A container view: a sub-tree bind mount listed first, then the real
	// hierarchy root; the root mount must win.
	mountinfoSubtree = `500 400 0:30 /kubepods.slice/pod1 /host/sys/fs/cgroup ro,relatime - cgroup2 cgroup2 rw
501 400 0:30 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw
`
	// cgroup v1 only.
	mountinfoNoV2 = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
`
)

func TestCgroupFindCgroup2Mount(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"hybrid", mountinfoHybrid, "/sys/fs/cgroup/unified"},
		{"pure-v2", mountinfoPureV2, "/sys/fs/cgroup"},
		{"escaped-space", mountinfoEscaped, "/mnt/my cgroups"},
		{"prefer-hierarchy-root", mountinfoSubtree, "/sys/fs/cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findCgroup2Mount(strings.NewReader(tc.text))
			if err != nil {
				t.Fatalf("findCgroup2Mount: %v", err)
			}
			if got != tc.want {
				t.Fatalf("mount point = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("no-cgroup2", func(t *testing.T) {
		_, err := findCgroup2Mount(strings.NewReader(mountinfoNoV2))
		if !errors.Is(err, errNoCgroup2) {
			t.Fatalf("err = %v, want errNoCgroup2", err)
		}
		if !strings.Contains(err.Error(), "cgroup2") {
			t.Fatalf("error %q does not say what is missing", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		if _, err := findCgroup2Mount(strings.NewReader("")); !errors.Is(err, errNoCgroup2) {
			t.Fatalf("err = %v, want errNoCgroup2", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		if _, err := findCgroup2Mount(strings.NewReader("40 30 0:37 / /sys/fs/cgroup/unified rw cgroup2\n")); err == nil || errors.Is(err, errNoCgroup2) {
			t.Fatalf("err = %v, want a malformed-line error", err)
		}
	})
}

// kernelRecords is a CgroupSource that answers from a fixed set of kernel records.
type kernelRecords struct {
	paths map[uint64]tracer.CgroupPath
	calls int
}

func (r *kernelRecords) LookupCgroup(id uint64, p *tracer.CgroupPath) (bool, error) {
	r.calls++
	v, ok := r.paths[id]
	if ok {
		*p = v
	}
	return ok, nil
}

// record builds a kernel record from a path, leaf first as the BPF program
// writes it.
func record(path string, flags tracer.CgroupFlag) tracer.CgroupPath {
	var p tracer.CgroupPath
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if path == "/" {
		parts = nil
	}
	for i := range parts {
		name := parts[len(parts)-1-i]
		for j := 0; j < len(name) && j < len(p.Names[i])-1; j++ {
			p.Names[i][j] = int8(name[j])
		}
	}
	p.Depth, p.Flags = uint32(len(parts)), flags
	return p
}

// TestCgroupResolverKernelRecord: the path comes from the kernel's record,
// cut records are not taken for a path, and the cache holds what it found.
func TestCgroupResolverKernelRecord(t *testing.T) {
	const long = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod03f3f104_3215_44f2_9686_d4dd1f05a7ed.slice/cri-containerd-09d185410c4e25236cc24717f881589bb0978b24eafd101624e627a4dd8d3439.scope"
	src := &kernelRecords{paths: map[uint64]tracer.CgroupPath{
		1: record("/", 0), 2: record(long, 0), 3: record("/a/b", tracer.CgroupDeep), 4: record("/a/b", tracer.CgroupLong),
	}}
	r, err := newCgroupResolver(t.TempDir(), src, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, want := range map[uint64]string{1: "/", 2: long} {
		if got, why := r.Path(id); got != want || why != "" {
			t.Errorf("Path(%d) = %q, %q; want %q", id, got, why, want)
		}
	}
	for _, id := range []uint64{3, 4, 99} {
		got, why := r.Path(id)
		if got != "" || why == "" {
			t.Errorf("Path(%d) = %q, %q; want no path and a reason", id, got, why)
		}
		t.Logf("Path(%d): %s", id, why)
	}
	calls := src.calls
	if got, _ := r.Path(2); got != long || src.calls != calls {
		t.Fatalf("a cached path asked the kernel again (%d calls, was %d)", src.calls, calls)
	}
	if r.FromKernel.Load() != 2 || r.Unresolved.Load() != 3 {
		t.Fatalf("counters: from kernel %d, unresolved %d; want 2, 3", r.FromKernel.Load(), r.Unresolved.Load())
	}
	// Bound: two generations of max/2 entries.
	for id := uint64(100); id < 110; id++ {
		src.paths[id] = record("/x", 0)
		r.Path(id)
	}
	if n := r.Len(); n > r.Cap() {
		t.Fatalf("Len %d over the bound %d", n, r.Cap())
	}
}

func TestCgroupResolverMissingRoot(t *testing.T) {
	if _, err := NewCgroupResolverAt(filepath.Join(t.TempDir(), "nope"), nil); err == nil {
		t.Fatal("NewCgroupResolverAt on a missing directory succeeded")
	}
}

func TestCgroupResolverPathNoAlloc(t *testing.T) {
	src := &kernelRecords{paths: map[uint64]tracer.CgroupPath{7: record("/a/b", 0)}}
	r, err := newCgroupResolver(t.TempDir(), src, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sink string
	allocs := testing.AllocsPerRun(1000, func() {
		p, why := r.Path(7)
		if why != "" {
			panic(why)
		}
		sink = p
	})
	if allocs != 0 {
		t.Fatalf("Path on a hit allocates %.1f times per call", allocs)
	}
	if sink != "/a/b" {
		t.Fatalf("Path = %q", sink)
	}
}

// requireCgroup2 returns the real cgroup2 mount point, or skips the test when
// the environment cannot run it (fails instead if EADDR_REQUIRE_BPF=1).
func requireCgroup2(t testing.TB) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("EADDR_REQUIRE_BPF") == "1" {
			t.Fatalf(format+" (EADDR_REQUIRE_BPF=1)", args...)
		}
		t.Skipf(format+" (set EADDR_REQUIRE_BPF=1 to make this fatal)", args...)
	}
	if os.Geteuid() != 0 {
		unavailable("creating cgroups needs root (euid %d)", os.Geteuid())
	}
	f, err := os.Open(mountinfoPath)
	if err != nil {
		unavailable("cannot read mountinfo: %v", err)
	}
	defer f.Close()
	mnt, err := findCgroup2Mount(f)
	if err != nil {
		unavailable("no cgroup v2: %v", err)
	}
	return mnt
}

// makeCgroupTree creates <mnt>/eaddr-test-<rand>/kubepods/besteffort/pod1234
// and removes it (deepest first) when the test ends. It returns the test's
// top-level directory name and the leaf path.
func makeCgroupTree(t testing.TB, mnt string) (top, leaf string) {
	t.Helper()
	top = fmt.Sprintf("eaddr-test-%d-%08x", os.Getpid(), rand.Uint32())
	dirs := []string{filepath.Join(mnt, top)}
	for _, name := range []string{"kubepods", "besteffort", "pod1234"} {
		dirs = append(dirs, filepath.Join(dirs[len(dirs)-1], name))
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			if os.Getenv("EADDR_REQUIRE_BPF") != "1" && (errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) {
				t.Skipf("cannot create cgroups under %s: %v", mnt, err)
			}
			t.Fatalf("mkdir %s: %v", d, err)
		}
		t.Cleanup(func() { rmdirCgroup(t, d) }) // LIFO: deepest first
	}
	return top, dirs[len(dirs)-1]
}

// rmdirCgroup removes a cgroup directory, retrying on EBUSY (the kernel may
// still be tearing down a just-reaped task, later on a busy machine) for up
// to 30 s.
func rmdirCgroup(t testing.TB, dir string) {
	t.Helper()
	var err error
	for range 1500 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("cleanup: rmdir %s: %v", dir, err)
}

// TestCgroupResolverByHandle: without a kernel record, a cgroup that exists is
// named through open_by_handle_at, one created a moment ago too; one removed is
// not named, and the reason says so.
func TestCgroupResolverByHandle(t *testing.T) {
	mnt := requireCgroup2(t)
	top, leaf := makeCgroupTree(t, mnt)
	r, err := NewCgroupResolverAt(mnt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := "/" + top + "/kubepods/besteffort/pod1234"
	if p, why := r.Path(inodeOf(t, leaf)); p != want {
		t.Fatalf("Path(leaf) = %q (%s), want %q", p, why, want)
	}
	if p, why := r.Path(inodeOf(t, mnt)); p != "/" {
		t.Fatalf("Path(root) = %q (%s), want /", p, why)
	}
	// The inode is the id the kernel uses (bpf_get_current_cgroup_id).
	if h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, leaf, 0); err != nil {
		t.Fatalf("name_to_handle_at(%s): %v", leaf, err)
	} else if kid := binary.NativeEndian.Uint64(h.Bytes()); kid != inodeOf(t, leaf) || h.Type() != fileIDKernfs {
		t.Fatalf("cgroup file handle %d (type %#x) != inode %d", kid, h.Type(), inodeOf(t, leaf))
	}
	late := filepath.Join(leaf, "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	lateID := inodeOf(t, late)
	gone := filepath.Join(leaf, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	goneID := inodeOf(t, gone)
	rmdirCgroup(t, gone)
	rmdirCgroup(t, late+"-never") // no-op: ENOENT
	if p, why := r.Path(lateID); p != want+"/late" {
		t.Fatalf("Path(late) = %q (%s), want %q", p, why, want+"/late")
	}
	rmdirCgroup(t, late)
	if p, why := r.Path(goneID); p != "" || !strings.Contains(why, "no longer exists") {
		t.Fatalf("Path(removed) = %q, %q; want no path, \"no longer exists\"", p, why)
	}
	if p, _ := r.Path(lateID); p != want+"/late" {
		t.Fatalf("a removed cgroup lost its cached path: %q", p)
	}
}

func TestCgroupResolverMatchesProcCgroup(t *testing.T) {
	mnt := requireCgroup2(t)
	_, leaf := makeCgroupTree(t, mnt)

	r, err := NewCgroupResolver(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, why := r.Path(inodeOf(t, leaf))
	if want == "" {
		t.Fatalf("leaf %s not resolved: %s", leaf, why)
	}

	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered after makeCgroupTree's cleanups, so it runs before them:
	// the child is gone before the leaf is removed.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("moving pid %d into %s: %v", pid, leaf, err)
	}

	got := procCgroupV2Path(t, pid)
	if got != want {
		t.Fatalf("/proc/%d/cgroup says %q, resolver says %q", pid, got, want)
	}
	t.Logf("pid %d in %s (%s)", pid, got, filepath.Join(mnt, got))
}

// procCgroupV2Path returns the "0::<path>" entry of /proc/<pid>/cgroup.
func procCgroupV2Path(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("/proc/%d/cgroup has no 0:: line", pid)
	return ""
}
