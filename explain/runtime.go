package explain

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/eaddr/eaddr/decode"
	"golang.org/x/sys/unix"
)

// Where Detector looks for an executable whose process has already exited.
var binDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

type exeKey struct{ dev, ino uint64 }

type binEntry struct {
	info   BinaryInfo
	ok     bool
	source string // how it was found: "exe" (/proc/PID/exe) or "path"
	at     time.Time
	// notAnalysed, for a binary past binLimits, is why its events name no
	// client (Explanation.ClientUnknown); retry is false when another look
	// would only find the same (every bound but the time budget).
	notAnalysed string
	retry       bool
}

// Detector finds out, per event, how the failing program renders errnos,
// from its binary. The kernel gives each event the executable's device,
// inode and file name and the start of argv, so the binary is found even
// when the process exited before the event was handled: through
// /proc/PID/exe while it lives, else by looking for a file with that inode
// under the parent's root (argv[0], then the usual bin directories). What is
// learned is cached per binary; a binary that could not be found is retried
// after NegativeTTL. A binary past the bounds on the work of analysing one
// (binLimits) is counted (BinariesGivenUp) and not looked at again while it
// is cached, unless it was the time budget that ran out. Not safe for
// concurrent use.
type Detector struct {
	Proc        string // procfs mount, "/proc"
	MaxEntries  int
	NegativeTTL time.Duration

	cache map[exeKey]*binEntry
	now   func() time.Time
	// A live process per mount namespace: its /proc/PID/root is the file
	// system a container's exited process saw.
	byMntNS   map[uint32]int
	mntWalked time.Time
	// Lookups counts cache misses that went to the file system (for tests).
	Lookups  int
	givenUp  uint64
	analyses int // files analysed (for tests)
}

// newDetector returns a Detector on /proc.
func newDetector() *Detector {
	return &Detector{Proc: "/proc", MaxEntries: 4096, NegativeTTL: 10 * time.Second,
		cache: make(map[exeKey]*binEntry), now: time.Now, byMntNS: map[uint32]int{}}
}

// binaryOf returns the analysis of ev's executable and how it was found
// ("exe", "path", or "cache:" + either). ok is false when it is unknown.
func (d *Detector) binaryOf(ev *decode.Event) (info *BinaryInfo, source string, ok bool) {
	e, source := d.lookup(ev)
	if e == nil || !e.ok {
		return nil, "", false
	}
	return &e.info, source, true
}

// lookup returns ev's entry and how it was found (as binaryOf), from the
// cache or the file system; nil when ev names no executable. It does not
// allocate on a hit.
func (d *Detector) lookup(ev *decode.Event) (*binEntry, string) {
	if ev.ExeIno == 0 {
		return nil, ""
	}
	key := exeKey{ev.ExeDev, ev.ExeIno}
	if e, hit := d.cache[key]; hit && (e.ok || (e.notAnalysed != "" && !e.retry) || d.now().Sub(e.at) < d.NegativeTTL) {
		return e, "cache"
	}
	d.Lookups++
	e := &binEntry{at: d.now()}
	e.info, e.source, e.ok = d.find(ev, key, e)
	if e.notAnalysed != "" {
		d.givenUp++
	}
	if len(d.cache) >= d.MaxEntries {
		clear(d.cache) // rare: a node runs far fewer distinct binaries
	}
	d.cache[key] = e
	return e, e.source
}

// BinariesGivenUp counts the binaries not analysed because they were past
// the bounds on the work of analysing one: once per binary looked up
// (again after the cache forgot it, or NegativeTTL after its reading took
// too long).
func (d *Detector) BinariesGivenUp() uint64 { return d.givenUp }

// CacheSizes reports the binaries cached and the bound.
func (d *Detector) CacheSizes() (binaries, bound int) { return len(d.cache), d.MaxEntries }

// find analyses ev's executable. A binary past binLimits is not looked for
// again through another path (it is the same file): find records why in e
// and returns ok false.
func (d *Detector) find(ev *decode.Event, key exeKey, e *binEntry) (BinaryInfo, string, bool) {
	name := string(ev.ExeName)
	pid := strconv.FormatUint(uint64(ev.PID), 10)
	if f, err := os.Open(filepath.Join(d.Proc, pid, "exe")); err == nil {
		defer f.Close()
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil && st.Ino == key.ino && st.Dev == key.dev {
			d.analyses++
			info, err := analyzeBinaryFile(f, name)
			if err == nil {
				return info, "exe", true
			}
			if e.gaveUp(err) {
				return BinaryInfo{}, "", false
			}
		}
	}
	// The process is gone (or its pid was reused): find a file with the same
	// identity in the file system the process saw. Its parent usually lives
	// on and shares the mount namespace.
	roots := []string{filepath.Join(d.Proc, strconv.FormatUint(uint64(ev.PPID), 10), "root")}
	if pid := d.inMntNS(ev.MntNS); pid > 0 {
		roots = append(roots, filepath.Join(d.Proc, strconv.Itoa(pid), "root"))
	}
	roots = append(roots, "/")
	var paths []string
	if argv0 := firstArg(ev.Args); filepath.IsAbs(argv0) {
		paths = append(paths, argv0)
	}
	if name != "" && name == filepath.Base(name) {
		for _, dir := range binDirs {
			paths = append(paths, filepath.Join(dir, name))
		}
	}
	for _, root := range roots {
		for _, p := range paths {
			full := filepath.Join(root, p)
			var st unix.Stat_t
			if unix.Stat(full, &st) != nil || st.Ino != key.ino || st.Dev != key.dev {
				continue
			}
			d.analyses++
			info, err := analyzeBinaryPath(full)
			if err == nil {
				info.Name = name
				return info, "path", true
			}
			if e.gaveUp(err) {
				return BinaryInfo{}, "", false
			}
		}
	}
	return BinaryInfo{}, "", false
}

// gaveUp records, for an analysis that stopped at one of binLimits, why the
// binary was not analysed, and reports whether it did.
func (e *binEntry) gaveUp(err error) bool {
	var le *limitError
	if !errors.As(err, &le) {
		return false
	}
	e.notAnalysed = "the program's binary was not analysed: " + le.why +
		" (eaddr bounds its work on one binary), so what it printed is unknown: grep its logs for the errno text"
	e.retry = le.retry
	return true
}

// inMntNS returns a live process in mount namespace mntns, walking /proc
// at most once per second to learn them.
func (d *Detector) inMntNS(mntns uint32) int {
	if mntns == 0 {
		return 0
	}
	if pid, ok := d.byMntNS[mntns]; ok && procExists(d.Proc, pid) {
		return pid
	}
	now := d.now()
	if now.Sub(d.mntWalked) < time.Second {
		return 0
	}
	d.mntWalked = now
	clear(d.byMntNS)
	entries, err := os.ReadDir(d.Proc)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(d.Proc, e.Name(), "ns/mnt"), &st) == nil {
			if _, ok := d.byMntNS[uint32(st.Ino)]; !ok {
				d.byMntNS[uint32(st.Ino)] = pid
			}
		}
	}
	return d.byMntNS[mntns]
}

func procExists(proc string, pid int) bool {
	_, err := os.Stat(filepath.Join(proc, strconv.Itoa(pid)))
	return err == nil
}

// firstArg is argv[0] from the NUL-separated args.
func firstArg(args []byte) string {
	for i, c := range args {
		if c == 0 {
			return string(args[:i])
		}
	}
	return string(args)
}

// argAt returns argv[i] from the NUL-separated args without allocating, or
// nil when it was not captured.
func argAt(args []byte, i int) []byte {
	for ; i > 0; i-- {
		j := indexByte(args, 0)
		if j < 0 {
			return nil
		}
		args = args[j+1:]
	}
	if j := indexByte(args, 0); j >= 0 {
		return args[:j]
	}
	return args
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func baseName(b []byte) []byte {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '/' {
			return b[i+1:]
		}
	}
	return b
}
