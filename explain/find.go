package explain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/procroot"
)

// The file system side of the Detector: finding an event's binary where the
// process saw it, and opening it only once it is known to be that binary.

// Where Finder looks for an executable whose process has already exited.
var binDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

var (
	// errNotExe: the file opened is not the executable the kernel recorded
	// for the event (another device or inode).
	errNotExe = errors.New("not the executable the kernel recorded")
	// errNotRegular: not a regular file (a directory, FIFO, socket or
	// device node): never opened for reading.
	errNotRegular = fmt.Errorf("%w (not a regular file)", errNotELF)
	// errNoOpenat2 wraps openat2's error when it is missing or filtered.
	errNoOpenat2 = errors.New("openat2 is not available")
)

// Why a binary is not analysed, besides binLimits (client_unknown).
var (
	whyMismatched = NotAnalysed("no file at its path in its root is the executable the kernel recorded for it " +
		"(the device and inode differ: replaced, moved or swapped since it started), and eaddr reads no other")
	whyNoOpenat2 = NotAnalysed("openat2 is not available to eaddr (a kernel before 5.6, or a seccomp profile " +
		"that filters it), and eaddr opens a container's files only with it, beneath the container's root")
	whyNotYet = NotAnalysed("its analysis had not finished when this event was written")
)

// NotAnalysed is the sentence of client_unknown for a binary not analysed
// because of why.
func NotAnalysed(why string) string {
	return "the program's binary was not analysed: " + why + ", so what it printed is unknown: grep its logs for the errno text"
}

// Found is what one look for an event's binary found, for Detector.Learn.
type Found struct {
	info   BinaryInfo
	ok     bool
	source string // how it was found: "exe" (/proc/PID/exe) or "path"
	// notAnalysed, for a binary found but not analysed, is why its events
	// name no client (Explanation.ClientUnknown); retry is false when
	// another look would only find the same (every bound but the time
	// budget, openat2 missing).
	notAnalysed string
	retry       bool
	gaveUp      bool // past binLimits: counted in BinariesGivenUp
	mismatched  bool // not found, and a file it looked at was another: BinariesMismatched
}

// Finder finds, opens and analyses the binary of an event, which may
// block on the file system for as long as the file system takes: the
// trace runs it on goroutines of its own, the Detector itself only when it
// is not Async. Not safe for concurrent use: one per goroutine.
type Finder struct {
	Proc string // procfs mount, "/proc"
	now  func() time.Time
	// A live process per mount namespace: its /proc/PID/root is the file
	// system a container's exited process saw.
	byMntNS   map[uint32]int
	mntWalked time.Time
	analyses  int // files analysed (for tests)
}

// NewFinder returns a Finder on /proc.
func NewFinder() *Finder {
	return &Finder{Proc: "/proc", now: time.Now, byMntNS: map[uint32]int{}}
}

// Find looks for ev's executable and analyses it. It opens only
// /proc/PID/exe (the kernel's own link to the running executable), and,
// once the process is gone, argv[0] and the usual bin directories beneath
// the root of its parent or of a live process of its mount namespace
// (openat2 RESOLVE_IN_ROOT: no symlink or ".." leaves that root), and no
// root that is not of its mount namespace. Each file is opened O_PATH
// first and opened for reading only when it is a regular file with the
// device and inode the kernel recorded for ev: a symlink or path swapped
// meanwhile, a FIFO or a device node is never opened for reading, and no
// byte is read of any file but that one.
func (f *Finder) Find(ev *decode.Event) Found {
	var fd Found
	if ev.ExeIno == 0 {
		return fd
	}
	key := exeKey{ev.ExeDev, ev.ExeIno}
	name := string(ev.ExeName)
	file, err := openExe(f.Proc, ev.PID, key)
	if f.try(&fd, file, err, name, "exe") {
		return fd
	}
	roots := f.roots(ev)
	defer func() {
		for _, r := range roots {
			unix.Close(r)
		}
	}()
	for _, root := range roots {
		for _, rel := range candidates(ev, name) {
			file, err := openInRoot(root, rel, &key)
			if f.try(&fd, file, err, name, "path") {
				return fd
			}
		}
	}
	if fd.mismatched {
		fd.notAnalysed, fd.retry = whyMismatched, true
	}
	return fd
}

// try analyses file, or notes why a candidate was not opened; true when the
// look is over: analysed, past binLimits (the same file under another path
// would be too), or openat2 missing.
func (f *Finder) try(fd *Found, file *os.File, err error, name, source string) bool {
	switch {
	case errors.Is(err, errNotExe), errors.Is(err, errNotRegular):
		fd.mismatched = true
		return false
	case errors.Is(err, errNoOpenat2):
		fd.notAnalysed, fd.retry = whyNoOpenat2, false
		return true
	case err != nil:
		return false
	}
	defer file.Close()
	f.analyses++
	info, err := analyzeBinaryFile(file, name)
	if err == nil {
		*fd = Found{info: info, ok: true, source: source}
		return true
	}
	return fd.gaveUpOn(err)
}

// gaveUpOn records, for an analysis that stopped at one of binLimits, why
// the binary was not analysed, and reports whether it did.
func (fd *Found) gaveUpOn(err error) bool {
	var le *limitError
	if !errors.As(err, &le) {
		return false
	}
	fd.notAnalysed = NotAnalysed(le.why + " (eaddr bounds its work on one binary)")
	fd.retry, fd.gaveUp = le.retry, true
	return true
}

// candidates are the paths the binary of an exited process may have in its
// root: argv[0] when absolute, then name in the usual bin directories.
func candidates(ev *decode.Event, name string) []string {
	var paths []string
	if argv0 := firstArg(ev.Args); filepath.IsAbs(argv0) {
		paths = append(paths, argv0)
	}
	if name != "" && name == filepath.Base(name) {
		for _, dir := range binDirs {
			paths = append(paths, filepath.Join(dir, name))
		}
	}
	return paths
}

// roots opens (O_PATH) the root of ev's parent and of a live process of its
// mount namespace, each only while that process is in it: the file system
// the exited process saw. None when the namespace is not known.
func (f *Finder) roots(ev *decode.Event) []int {
	if ev.MntNS == 0 {
		return nil
	}
	var roots []int
	ppid := int(ev.PPID)
	for _, pid := range [...]int{ppid, f.inMntNS(ev.MntNS)} {
		if pid <= 0 || (pid == ppid && len(roots) > 0) {
			continue
		}
		if root, _, err := procroot.Process(pid, ev.MntNS, "/"); err == nil {
			roots = append(roots, root)
		}
	}
	return roots
}

// openExe opens the executable of the running process pid through the
// kernel's link, if it is still key.
func openExe(proc string, pid uint32, key exeKey) (*os.File, error) {
	fd, err := unix.Open(proc+"/"+strconv.FormatUint(uint64(pid), 10)+"/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return openChecked(fd, &key)
}

// openInRoot opens rel beneath the directory root (openat2 RESOLVE_IN_ROOT)
// for reading, if it is want (nil: any regular file).
func openInRoot(root int, rel string, want *exeKey) (*os.File, error) {
	fd, err := procroot.OpenAt(root, rel, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		if procroot.Unavailable(err) {
			return nil, fmt.Errorf("%w: %w", errNoOpenat2, err)
		}
		return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	return openChecked(fd, want)
}

// openChecked opens for reading the file that the O_PATH descriptor pathfd
// holds, once fstat says it is a regular file and, unless want is nil, the
// executable want names. Nothing is opened for reading before: a FIFO would
// block, a device node's open has effects of its own. O_NONBLOCK is cleared
// once it is open.
func openChecked(pathfd int, want *exeKey) (*os.File, error) {
	st, err := fstatRegular(pathfd, want)
	if err != nil {
		return nil, err
	}
	fd, err := procroot.Reopen(pathfd, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "binary", Err: err}
	}
	// Reopening through /proc/self/fd opens the inode pathfd holds; checked
	// again all the same, before a byte is read.
	if _, err := fstatRegular(fd, &exeKey{st.Dev, st.Ino}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: "binary", Err: err}
	}
	return os.NewFile(uintptr(fd), "/proc/self/fd/"+strconv.Itoa(fd)), nil
}

// fstatRegular is fstat of fd, an error unless it is a regular file and,
// unless want is nil, want.
func fstatRegular(fd int, want *exeKey) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, &os.PathError{Op: "stat", Path: "binary", Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, errNotRegular
	}
	if want != nil && (st.Dev != want.dev || st.Ino != want.ino) {
		return st, errNotExe
	}
	return st, nil
}

// inMntNS returns a live process in mount namespace mntns, walking /proc
// at most once per second to learn them.
func (f *Finder) inMntNS(mntns uint32) int {
	if pid, ok := f.byMntNS[mntns]; ok && procExists(f.Proc, pid) {
		return pid
	}
	now := f.now()
	if now.Sub(f.mntWalked) < time.Second {
		return 0
	}
	f.mntWalked = now
	clear(f.byMntNS)
	entries, err := os.ReadDir(f.Proc)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(f.Proc, e.Name(), "ns/mnt"), &st) == nil {
			if _, ok := f.byMntNS[uint32(st.Ino)]; !ok {
				f.byMntNS[uint32(st.Ino)] = pid
			}
		}
	}
	return f.byMntNS[mntns]
}

func procExists(proc string, pid int) bool {
	_, err := os.Stat(filepath.Join(proc, strconv.Itoa(pid)))
	return err == nil
}
