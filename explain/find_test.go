package explain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// The Finder opens a binary only beneath the process's root, only the file
// the kernel recorded, and never anything but a regular file for reading.

func selfMntNS(t testing.TB) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &st); err != nil {
		t.Skipf("no /proc/self/ns/mnt: %v", err)
	}
	return uint32(st.Ino)
}

// container starts busybox sleep chrooted into a new directory, in a mount
// namespace of its own: a container's process, whose root is that
// directory. It returns the root, the process's pid and its mount
// namespace.
func container(t *testing.T) (root string, pid int, mntns uint32) {
	t.Helper()
	testenv.RequireRoot(t)
	bb, err := os.ReadFile(binLookTool(t, "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/busybox", "sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Cloneflags: syscall.CLONE_NEWNS}
	if err := pdeath.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/mnt", &st); err != nil {
		t.Fatal(err)
	}
	return root, cmd.Process.Pid, uint32(st.Ino)
}

// exited is the event of a process of the container (gone: the pid is
// past pid_max) that ran the file at path, argv[0] argv0.
func exited(t *testing.T, path string, ppid int, mntns uint32, argv0 string) *decode.Event {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return &decode.Event{PID: 1 << 30, PPID: uint32(ppid), MntNS: mntns, ExeName: []byte(filepath.Base(path)),
		ExeIno: st.Ino, ExeDev: st.Dev, Args: []byte(argv0 + "\x00")}
}

// A binary is looked for beneath the process's root only: the same file
// at argv[0] on the host (outside the container's root) is not found,
// while a file at argv[0] inside it is.
func TestFindOnlyBeneathTheRoot(t *testing.T) {
	root, pid, mntns := container(t)
	outside := filepath.Join(filepath.Dir(root), "outside", "app")
	if err := os.MkdirAll(filepath.Dir(outside), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, (&craftELF{}).bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	f := NewFinder()
	if got := f.Find(exited(t, outside, pid, mntns, outside)); got.ok || f.analyses != 0 {
		t.Errorf("a binary outside the process's root (%s) was found: %+v, %d analysed", outside, got, f.analyses)
	}
	inside := filepath.Join(root, "bin", "busybox")
	if got := f.Find(exited(t, inside, pid, mntns, "/bin/busybox")); !got.ok || got.source != "path" || got.info.Runtime != runtimeBusyBox {
		t.Errorf("the binary inside the process's root was not found: %+v", got)
	}
}

// watch counts the inotify events of mask on each of paths.
type watch struct{ fd int }

func newWatch(t *testing.T, mask uint32, paths ...string) watch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	for _, p := range paths {
		if _, err := unix.InotifyAddWatch(fd, p, mask); err != nil {
			t.Fatal(err)
		}
	}
	return watch{fd}
}

// events is how many events were queued since the last call.
func (w watch) events() int {
	n := 0
	buf := make([]byte, 64<<10)
	for {
		m, err := unix.Read(w.fd, buf)
		if m <= 0 || err != nil {
			return n
		}
		for off := 0; off+unix.SizeofInotifyEvent <= m; n++ {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// The race of the review: while the Finder looks for a container
// process's binary by its argv[0], a symlink there is swapped, flat out,
// between the binary, another file in the container and one outside it
// (reached by ".." by a walk that does not stop at the container's root).
// Over many thousands of looks the binary is found and analysed, and
// neither other file is ever opened for reading (inotify: no open, no
// read) nor taken for it.
func TestFindRaceNeverReadsAnotherFile(t *testing.T) {
	root, pid, mntns := container(t)
	dir := filepath.Join(root, "x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real") // a static ELF of no known libc: runtime c
	other := filepath.Join(dir, "other")
	outside := filepath.Join(filepath.Dir(root), "outside")
	marked := append((&craftELF{}).bytes(), "BusyBox v9.9 (not the binary)"...) // runtime busybox
	for p, b := range map[string][]byte{real: (&craftELF{}).bytes(), other: marked, outside: marked} {
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := newWatch(t, unix.IN_OPEN|unix.IN_ACCESS, other, outside)
	stop := swapLink(t, filepath.Join(dir, "app"), "real", "other", "../../outside")
	ev := exited(t, real, pid, mntns, "/x/app")
	ev.ExeName = []byte("app")
	looks := 20_000
	if testing.Short() {
		looks = 2_000
	}
	f := NewFinder()
	var found, mismatched int
	for range looks {
		got := f.Find(ev)
		switch {
		case got.ok && got.info.Runtime != runtimeC:
			t.Fatalf("the binary was taken for another file: %+v", got.info)
		case got.ok:
			found++
		case got.mismatched:
			mismatched++
		}
	}
	swaps := stop()
	t.Logf("%d looks, %d swaps: the binary found %d times, another file at its path %d times", looks, swaps, found, mismatched)
	if n := w.events(); n != 0 {
		t.Errorf("the other files were opened or read %d times", n)
	}
	if found == 0 || mismatched == 0 {
		t.Errorf("the race did not happen both ways (%d found, %d another file): the test proves nothing", found, mismatched)
	}
}

// swapLink replaces the symlink at path, flat out until stop, by one to
// each target in turn (rename over it: the path always names one of
// them). stop returns the swaps made.
func swapLink(t *testing.T, path string, targets ...string) (stop func() int) {
	t.Helper()
	if err := os.Symlink(targets[0], path); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	swaps := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := path + ".new"
		for i := 1; !done.Load(); i++ {
			os.Remove(tmp)
			if os.Symlink(targets[i%len(targets)], tmp) != nil || os.Rename(tmp, path) != nil {
				t.Error("swapping the link failed")
				return
			}
			swaps++
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { done.Store(true); wg.Wait() })
		return swaps
	}
	t.Cleanup(func() { stop() })
	return stop
}

// A FIFO that is, by its device and inode, the file the event names is
// not opened for reading (which would block, or with O_NONBLOCK still
// wake a writer): only a regular file is. A device node is refused by
// the same check.
func TestFindNeverOpensAFIFO(t *testing.T) {
	root, pid, mntns := container(t)
	fifo := filepath.Join(root, "bin", "app")
	if err := unix.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWatch(t, unix.IN_OPEN, fifo)
	f := NewFinder()
	ev := exited(t, fifo, pid, mntns, "/bin/app")
	got := f.Find(ev)
	if got.ok || !got.mismatched || f.analyses != 0 {
		t.Errorf("a FIFO with the event's identity: %+v, %d analysed; want not found, another file", got, f.analyses)
	}
	if n := w.events(); n != 0 {
		t.Errorf("the FIFO was opened %d times", n)
	}
	// The event says why, and the binary is counted once.
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	x.Detector.Async = true
	x.Detector.Learn(ev, got)
	var ex Explanation
	x.Explain(ev, &ex, false)
	x.Explain(ev, &ex, false)
	if ex.ClientUnknown != whyMismatched || x.Detector.BinariesMismatched() != 1 {
		t.Errorf("client_unknown %q, %d mismatched; want %q, 1", ex.ClientUnknown, x.Detector.BinariesMismatched(), whyMismatched)
	}
}

// Without openat2 (filtered here by seccomp on one thread, as a seccomp
// profile would for all), a binary under the process's root is not
// opened another way: it is not analysed, and the reason says why.
func TestFindWithoutOpenat2(t *testing.T) {
	root, pid, mntns := container(t)
	ev := exited(t, filepath.Join(root, "bin", "busybox"), pid, mntns, "/bin/busybox")
	var got Found
	withoutOpenat2(t, func() { got = NewFinder().Find(ev) })
	if got.ok || got.notAnalysed != whyNoOpenat2 || got.retry {
		t.Errorf("without openat2: %+v; want not analysed, for good, saying %q", got, whyNoOpenat2)
	}
	if got := NewFinder().Find(ev); !got.ok {
		t.Errorf("with openat2 the same event is not found: %+v", got)
	}
}

// withoutOpenat2 runs fn on a thread where openat2 fails with ENOSYS. The
// thread is locked to fn's goroutine and never unlocked: it ends with the
// goroutine, and its filter with it (no other thread has it).
func withoutOpenat2(t *testing.T, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- err
			return
		}
		filter := []unix.SockFilter{
			{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
			{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_OPENAT2, Jt: 0, Jf: 1},
			{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
			{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		}
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
			errc <- e
			return
		}
		if _, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH}); err != unix.ENOSYS {
			errc <- fmt.Errorf("the filter does not hold: openat2 gave %v", err)
			return
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
