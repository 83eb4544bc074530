package explain

import (
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
}

// Detector finds out, per event, how the failing program renders errnos,
// from its binary. The kernel gives each event the executable's device,
// inode and file name and the start of argv, so the binary is found even
// when the process exited before the event was handled: through
// /proc/PID/exe while it lives, else by looking for a file with that inode
// under the parent's root (argv[0], then the usual bin directories). What is
// learned is cached per binary; a binary that could not be found is retried
// after NegativeTTL. Not safe for concurrent use.
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
	Lookups int
}

// NewDetector returns a Detector on /proc.
func NewDetector() *Detector {
	return &Detector{Proc: "/proc", MaxEntries: 4096, NegativeTTL: 10 * time.Second,
		cache: make(map[exeKey]*binEntry), now: time.Now, byMntNS: map[uint32]int{}}
}

// Binary returns the analysis of ev's executable and how it was found
// ("exe", "path", or "cache:" + either). ok is false when it is unknown.
func (d *Detector) Binary(ev *decode.Event) (info *BinaryInfo, source string, ok bool) {
	if ev.ExeIno == 0 {
		return nil, "", false
	}
	key := exeKey{ev.ExeDev, ev.ExeIno}
	if e, hit := d.cache[key]; hit {
		if e.ok {
			return &e.info, "cache", true
		}
		if d.now().Sub(e.at) < d.NegativeTTL {
			return nil, "", false
		}
	}
	d.Lookups++
	e := &binEntry{at: d.now()}
	e.info, e.source, e.ok = d.find(ev, key)
	if len(d.cache) >= d.MaxEntries {
		clear(d.cache) // rare: a node runs far fewer distinct binaries
	}
	d.cache[key] = e
	if !e.ok {
		return nil, "", false
	}
	return &e.info, e.source, true
}

// CacheSizes reports the binaries cached and the bound.
func (d *Detector) CacheSizes() (binaries, bound int) { return len(d.cache), d.MaxEntries }

// remember records what is known of ev's binary, as if it had been found.
func (d *Detector) remember(ev *decode.Event, info BinaryInfo) {
	d.cache[exeKey{ev.ExeDev, ev.ExeIno}] = &binEntry{info: info, ok: true, source: "remembered", at: d.now()}
}

func (d *Detector) find(ev *decode.Event, key exeKey) (BinaryInfo, string, bool) {
	name := string(ev.ExeName)
	pid := strconv.FormatUint(uint64(ev.PID), 10)
	if f, err := os.Open(filepath.Join(d.Proc, pid, "exe")); err == nil {
		defer f.Close()
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil && st.Ino == key.ino && st.Dev == key.dev {
			if info, err := AnalyzeBinaryFile(f, name); err == nil {
				return info, "exe", true
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
			if info, err := AnalyzeBinary(full); err == nil {
				info.Name = name
				return info, "path", true
			}
		}
	}
	return BinaryInfo{}, "", false
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
