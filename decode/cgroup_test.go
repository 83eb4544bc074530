package decode

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

func inodeOf(t *testing.T, path string) uint64 {
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

func TestCgroupParseMountinfoFields(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(mountinfoEscaped))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountInfo{
		{Root: "/", MountPoint: "/", FSType: "ext4"},
		{Root: "/", MountPoint: "/mnt/my cgroups", FSType: "cgroup2"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d mounts, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestCgroupUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:             "/plain",
		`/a\040b`:            "/a b",
		`/tab\011nl\012`:     "/tab\tnl\n",
		`/back\134slash`:     `/back\slash`,
		`/short\04`:          `/short\04`,
		`/notoctal\089`:      `/notoctal\089`,
		`\040\040`:           "  ",
		`/trailing\`:         `/trailing\`,
		`/overflow\400x`:     `/overflow\400x`,
		`/mnt/my\040cgroups`: "/mnt/my cgroups",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCgroupResolverDirTree exercises walking, refresh and the rate limit on
// an ordinary directory tree, so it runs without root or cgroup2.
func TestCgroupResolverDirTree(t *testing.T) {
	root := t.TempDir()
	leaf := filepath.Join(root, "kubepods", "besteffort", "pod1234")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	// Regular files must be ignored.
	if err := os.WriteFile(filepath.Join(root, "kubepods", "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	r, err := newCgroupResolver(root, clk.Now, cgroupMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	if r.Root() != root {
		t.Fatalf("Root() = %q, want %q", r.Root(), root)
	}
	if got := r.Len(); got != 4 {
		t.Fatalf("Len() = %d, want 4 (root + 3 dirs)", got)
	}
	for path, want := range map[string]string{
		root:                            "/",
		filepath.Join(root, "kubepods"): "/kubepods",
		filepath.Dir(leaf):              "/kubepods/besteffort",
		leaf:                            "/kubepods/besteffort/pod1234",
	} {
		got, ok := r.Path(inodeOf(t, path))
		if !ok || got != want {
			t.Errorf("Path(ino(%s)) = %q, %v; want %q", path, got, ok, want)
		}
	}
	if n := r.walks.Load(); n != 1 {
		t.Fatalf("walks = %d after construction, want 1", n)
	}

	// Created after the resolver: the first miss within the second must not
	// walk, the first miss after it must.
	late := filepath.Join(leaf, "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	lateID := inodeOf(t, late)
	if p, ok := r.Path(lateID); ok {
		t.Fatalf("Path(late) = %q before the interval elapsed, want a miss", p)
	}
	if n := r.walks.Load(); n != 1 {
		t.Fatalf("walks = %d, want 1 (rate limited)", n)
	}
	clk.Advance(cgroupRefreshInterval)
	if p, ok := r.Path(lateID); !ok || p != "/kubepods/besteffort/pod1234/late" {
		t.Fatalf("Path(late) = %q, %v after refresh", p, ok)
	}
	if n := r.walks.Load(); n != 2 {
		t.Fatalf("walks = %d, want 2", n)
	}
	// An unknown id right after that refresh: miss without a walk.
	if _, ok := r.Path(1 << 62); ok {
		t.Fatal("unknown id resolved")
	}
	if n := r.walks.Load(); n != 2 {
		t.Fatalf("walks = %d, want 2 (rate limited)", n)
	}

	// A re-walk replaces the map: removed directories drop out.
	if err := os.Remove(late); err != nil {
		t.Fatal(err)
	}
	clk.Advance(cgroupRefreshInterval)
	if _, ok := r.Path(1 << 62); ok {
		t.Fatal("unknown id resolved")
	}
	if n := r.walks.Load(); n != 3 {
		t.Fatalf("walks = %d, want 3", n)
	}
	if got := r.Len(); got != 4 {
		t.Fatalf("Len() = %d after removing late, want 4", got)
	}
}

func TestCgroupResolverBound(t *testing.T) {
	root := t.TempDir()
	for i := range 10 {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newCgroupResolver(root, time.Now, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Len(); got != 5 {
		t.Fatalf("Len() = %d, want the bound 5", got)
	}
	if p, ok := r.Path(inodeOf(t, root)); !ok || p != "/" {
		t.Fatalf("root not cached under the bound: %q, %v", p, ok)
	}
}

func TestCgroupResolverMissingRoot(t *testing.T) {
	if _, err := NewCgroupResolverAt(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("NewCgroupResolverAt on a missing directory succeeded")
	}
}

func TestCgroupResolverPathNoAlloc(t *testing.T) {
	root := t.TempDir()
	leaf := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := NewCgroupResolverAt(root)
	if err != nil {
		t.Fatal(err)
	}
	id := inodeOf(t, leaf)
	var sink string
	allocs := testing.AllocsPerRun(1000, func() {
		p, ok := r.Path(id)
		if !ok {
			panic("miss")
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

func TestCgroupResolverConcurrent(t *testing.T) {
	root := t.TempDir()
	leaf := filepath.Join(root, "x")
	if err := os.Mkdir(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	r, err := newCgroupResolver(root, clk.Now, cgroupMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	id := inodeOf(t, leaf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if p, ok := r.Path(id); !ok || p != "/x" {
					t.Errorf("Path = %q, %v", p, ok)
					return
				}
				r.Path(uint64(1<<40 + g*10000 + i)) // misses
				if i%100 == 0 {
					clk.Advance(cgroupRefreshInterval)
				}
			}
		})
	}
	wg.Wait()
	// 8 goroutines * 20 advances: at most one walk per advance (+1 initial).
	if n := r.walks.Load(); n > 8*20+1 {
		t.Fatalf("walks = %d, more than one per interval", n)
	}
}

// requireCgroup2 returns the real cgroup2 mount point, or skips the test when
// the environment cannot run it (fails instead if EADDR_REQUIRE_BPF=1).
func requireCgroup2(t *testing.T) string {
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
func makeCgroupTree(t *testing.T, mnt string) (top, leaf string) {
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

// rmdirCgroup removes a cgroup directory, retrying briefly on EBUSY (the
// kernel may still be tearing down a just-reaped task).
func rmdirCgroup(t *testing.T, dir string) {
	t.Helper()
	var err error
	for range 50 {
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

func TestCgroupResolverRealCgroup2(t *testing.T) {
	mnt := requireCgroup2(t)
	top, leaf := makeCgroupTree(t, mnt)

	clk := newFakeClock()
	r, err := newCgroupResolver(mnt, clk.Now, cgroupMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	if r.Root() != mnt {
		t.Fatalf("Root() = %q, want %q", r.Root(), mnt)
	}
	walks := r.walks.Load()

	leafID := inodeOf(t, leaf)
	want := "/" + top + "/kubepods/besteffort/pod1234"
	if p, ok := r.Path(leafID); !ok || p != want {
		t.Fatalf("Path(leaf %d) = %q, %v; want %q", leafID, p, ok, want)
	}

	// The inode is the id the kernel uses (bpf_get_current_cgroup_id):
	// name_to_handle_at on cgroupfs returns the 64-bit kernfs id.
	if h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, leaf, 0); err != nil {
		t.Logf("name_to_handle_at(%s): %v (id cross-check skipped)", leaf, err)
	} else if b := h.Bytes(); len(b) != 8 {
		t.Errorf("cgroup file handle has %d bytes, want 8", len(b))
	} else if kid := binary.NativeEndian.Uint64(b); kid != leafID {
		t.Errorf("kernel cgroup id %d != inode %d", kid, leafID)
	}

	rootID := inodeOf(t, mnt)
	if p, ok := r.Path(rootID); !ok || p != "/" {
		t.Fatalf("Path(root %d) = %q, %v; want \"/\"", rootID, p, ok)
	}

	// A cgroup created after the resolver was built resolves after a miss,
	// once the rate limit allows a walk.
	late := filepath.Join(leaf, "late")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rmdirCgroup(t, late) })
	lateID := inodeOf(t, late)
	if p, ok := r.Path(lateID); ok {
		t.Fatalf("Path(late) = %q within the same second, want a rate-limited miss", p)
	}
	if got := r.walks.Load(); got != walks {
		t.Fatalf("walks = %d, want %d (rate limited)", got, walks)
	}
	clk.Advance(cgroupRefreshInterval)
	if p, ok := r.Path(lateID); !ok || p != want+"/late" {
		t.Fatalf("Path(late) = %q, %v after refresh; want %q", p, ok, want+"/late")
	}
	if got := r.walks.Load(); got != walks+1 {
		t.Fatalf("walks = %d, want %d", got, walks+1)
	}

	// A second unknown id inside the same second: miss, no walk.
	clk.Advance(cgroupRefreshInterval / 2)
	if p, ok := r.Path(^uint64(0)); ok {
		t.Fatalf("Path(unknown) = %q, want a miss", p)
	}
	if got := r.walks.Load(); got != walks+1 {
		t.Fatalf("walks = %d after an in-interval miss, want %d", got, walks+1)
	}
}

func TestCgroupResolverMatchesProcCgroup(t *testing.T) {
	mnt := requireCgroup2(t)
	_, leaf := makeCgroupTree(t, mnt)

	r, err := NewCgroupResolver()
	if err != nil {
		t.Fatal(err)
	}
	if r.Root() != mnt {
		t.Fatalf("NewCgroupResolver().Root() = %q, want %q", r.Root(), mnt)
	}
	want, ok := r.Path(inodeOf(t, leaf))
	if !ok {
		t.Fatalf("leaf %s not resolved", leaf)
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
