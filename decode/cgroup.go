package decode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// cgroupMaxEntries bounds the id->path cache. A re-walk replaces the
	// whole map, so removed cgroups do not accumulate.
	cgroupMaxEntries = 65536
	// cgroupRefreshInterval is the minimum time between two walks of the
	// hierarchy triggered by cache misses.
	cgroupRefreshInterval = time.Second
	// mountinfoPath is where the mount table of the current process lives.
	mountinfoPath = "/proc/self/mountinfo"
)

// CgroupResolver maps cgroup v2 ids to paths relative to the cgroup2 root.
//
// On cgroup v2 the id reported by bpf_get_current_cgroup_id() is the kernfs
// node id, which is the inode number of the cgroup's directory in the cgroup2
// mount. The resolver walks the mount once, caches id -> path, and re-walks on
// a miss at most once per second.
type CgroupResolver struct {
	root string

	// paths is replaced wholesale on every walk; readers only Load it, so a
	// hit takes no lock and does not allocate.
	paths atomic.Pointer[map[uint64]string]

	// walkMu serialises walks and guards lastWalk. Misses use TryLock so
	// they never wait for a walk in progress.
	walkMu   sync.Mutex
	lastWalk time.Time

	now        func() time.Time // injectable clock (tests)
	maxEntries int              // cache bound (tests may lower it)
	walks      atomic.Int64     // number of completed walk attempts (tests)
}

// NewCgroupResolver finds the cgroup2 mount in /proc/self/mountinfo, walks it
// once and returns a resolver that caches id -> path.
func NewCgroupResolver() (*CgroupResolver, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("cgroup: locating cgroup2 mount: %w", err)
	}
	defer f.Close()
	root, err := findCgroup2Mount(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s: %w", mountinfoPath, err)
	}
	return NewCgroupResolverAt(root)
}

// NewCgroupResolverAt is NewCgroupResolver with an explicit cgroup2 mount
// point.
func NewCgroupResolverAt(root string) (*CgroupResolver, error) {
	return newCgroupResolver(root, time.Now, cgroupMaxEntries)
}

func newCgroupResolver(root string, now func() time.Time, maxEntries int) (*CgroupResolver, error) {
	r := &CgroupResolver{
		root:       filepath.Clean(root),
		now:        now,
		maxEntries: maxEntries,
	}
	r.lastWalk = r.now()
	m, err := r.walk()
	if err != nil {
		return nil, err
	}
	r.paths.Store(&m)
	return r, nil
}

// Root returns the cgroup2 mount point the resolver walks.
func (r *CgroupResolver) Root() string { return r.root }

// Cap is the most cgroups it caches.
func (r *CgroupResolver) Cap() int { return r.maxEntries }

// Len reports how many cgroups are cached.
func (r *CgroupResolver) Len() int { return len(*r.paths.Load()) }

// Path returns the cgroup path of id relative to the cgroup2 root ("/" for
// the root itself). On a miss it re-walks the hierarchy, at most once per
// second; misses in between, or while another walk is running, return
// ("", false) immediately. Safe for concurrent use; a hit does not allocate.
func (r *CgroupResolver) Path(id uint64) (string, bool) {
	if p, ok := (*r.paths.Load())[id]; ok {
		return p, true
	}
	return r.refresh(id)
}

// refresh re-walks the hierarchy if the rate limit allows and looks id up in
// the new map.
func (r *CgroupResolver) refresh(id uint64) (string, bool) {
	if !r.walkMu.TryLock() {
		return "", false // a walk is in progress
	}
	defer r.walkMu.Unlock()
	// Another goroutine may have refreshed between our lookup and TryLock.
	if p, ok := (*r.paths.Load())[id]; ok {
		return p, true
	}
	now := r.now()
	if now.Sub(r.lastWalk) < cgroupRefreshInterval {
		return "", false
	}
	r.lastWalk = now
	m, err := r.walk()
	if err != nil {
		// Keep the old cache; the next miss after the interval retries.
		return "", false
	}
	r.paths.Store(&m)
	p, ok := m[id]
	return p, ok
}

// walk builds a fresh id -> path map of every cgroup directory below root.
// Directories that disappear during the walk are skipped; only an error on
// the root itself is reported.
func (r *CgroupResolver) walk() (map[uint64]string, error) {
	r.walks.Add(1)
	rootInfo, err := os.Stat(r.root)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	rootSt, ok := rootInfo.Sys().(*syscall.Stat_t)
	if !ok || !rootInfo.IsDir() {
		return nil, fmt.Errorf("cgroup: %s is not a directory", r.root)
	}
	m := make(map[uint64]string, 64)
	m[rootSt.Ino] = "/"

	err = filepath.WalkDir(r.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == r.root {
				return err
			}
			// Removed (ENOENT) or otherwise unreadable mid-walk: skip it.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if path == r.root {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fs.SkipDir // vanished between readdir and lstat
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || st.Dev != rootSt.Dev {
			return fs.SkipDir // not part of this cgroup2 mount
		}
		if len(m) >= r.maxEntries {
			return fs.SkipAll
		}
		rel := strings.TrimPrefix(path, r.root)
		if !strings.HasPrefix(rel, "/") {
			rel = "/" + rel
		}
		m[st.Ino] = rel
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cgroup: walking %s: %w", r.root, err)
	}
	return m, nil
}

// errNoCgroup2 is returned when the mount table has no cgroup2 entry.
var errNoCgroup2 = errors.New("no cgroup2 filesystem mounted (cgroup v2 is required to resolve cgroup ids; " +
	"on hybrid hosts it is usually at /sys/fs/cgroup/unified, or mount it with `mount -t cgroup2 none /sys/fs/cgroup`)")

// mountInfo is the part of a /proc/<pid>/mountinfo line the resolver needs.
type mountInfo struct {
	Root       string // field 4: root of the mount within the filesystem
	MountPoint string // field 5: mount point relative to the process root
	FSType     string // first field after the " - " separator
}

// parseMountinfo parses proc(5) mountinfo lines. Octal escapes (\040 for
// space etc.) in the root and mount point are decoded.
func parseMountinfo(rd io.Reader) ([]mountInfo, error) {
	var out []mountInfo
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		// Optional fields start at index 6; the separator is a lone "-".
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		out = append(out, mountInfo{
			Root:       unescapeOctal(fields[3]),
			MountPoint: unescapeOctal(fields[4]),
			FSType:     fields[sep+1],
		})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// findCgroup2Mount returns the mount point of the cgroup2 filesystem listed
// in the mountinfo text. A mount of the hierarchy root ("/") is preferred over
// bind mounts of a sub-tree; otherwise the first cgroup2 mount wins.
func findCgroup2Mount(rd io.Reader) (string, error) {
	mounts, err := parseMountinfo(rd)
	if err != nil {
		return "", err
	}
	found := ""
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		if m.Root == "/" {
			return m.MountPoint, nil
		}
		if found == "" {
			found = m.MountPoint
		}
	}
	if found == "" {
		return "", errNoCgroup2
	}
	return found, nil
}

// unescapeOctal decodes the \NNN octal escapes the kernel uses in mountinfo
// for space, tab, newline and backslash.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
