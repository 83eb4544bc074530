package pod

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/tracer"
)

// cgroupMaxEntries bounds the id -> path cache (two generations of half
// each). A cgroup v2 id is never reused, so an entry is never wrong, only old.
const cgroupMaxEntries = 16384

// mountinfoPath is where the mount table of the current process lives.
const mountinfoPath = "/proc/self/mountinfo"

// CgroupSource is the kernel's record of the path of each cgroup that failed
// (the tracer's cgroup_paths map): it answers after the cgroup is removed.
type CgroupSource interface {
	LookupCgroup(id uint64, p *tracer.CgroupPath) (bool, error)
}

// CgroupResolver maps cgroup v2 ids to paths relative to the cgroup2 root,
// exactly or not at all. On a cache miss it asks, in order:
//   - the kernel's record, written by the BPF program the first time a
//     cgroup fails, so it holds for cgroups already removed;
//   - the cgroup itself: a cgroup v2 id is a kernfs file handle, so
//     open_by_handle_at on the cgroup2 mount opens it while it exists
//     (CAP_DAC_READ_SEARCH), and /proc/self/fd names it.
//
// Each miss costs one map lookup (and one open on a rare second miss); there
// is no walk of the hierarchy and no rate limit. Safe for concurrent use.
type CgroupResolver struct {
	root    string
	mountFD int // the cgroup2 mount, for open_by_handle_at; -1 when it cannot be opened
	kernel  CgroupSource

	mu       sync.Mutex
	cur, old map[uint64]string // two generations: a full cur becomes old
	max      int
	scratch  tracer.CgroupPath

	// Counters of how misses were answered.
	FromKernel, FromHandle, Unresolved atomic.Uint64
}

// NewCgroupResolver finds the cgroup2 mount in /proc/self/mountinfo and
// returns a resolver that asks kernel (may be nil) and the mount.
func NewCgroupResolver(kernel CgroupSource) (*CgroupResolver, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("cgroup: locating cgroup2 mount: %w", err)
	}
	defer f.Close()
	root, err := findCgroup2Mount(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s: %w", mountinfoPath, err)
	}
	return NewCgroupResolverAt(root, kernel)
}

// NewCgroupResolverAt is NewCgroupResolver with an explicit cgroup2 mount
// point.
func NewCgroupResolverAt(root string, kernel CgroupSource) (*CgroupResolver, error) {
	return newCgroupResolver(root, kernel, cgroupMaxEntries)
}

func newCgroupResolver(root string, kernel CgroupSource, maxEntries int) (*CgroupResolver, error) {
	r := &CgroupResolver{root: filepath.Clean(root), kernel: kernel, max: maxEntries,
		cur: map[uint64]string{}, old: map[uint64]string{}}
	fd, err := unix.Open(r.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: opening the cgroup2 mount %s: %w", r.root, err)
	}
	r.mountFD = fd
	return r, nil
}

// Close releases the mount's descriptor.
func (r *CgroupResolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mountFD < 0 {
		return nil
	}
	err := unix.Close(r.mountFD)
	r.mountFD = -1
	return err
}

// Cap is the most cgroups it caches.
func (r *CgroupResolver) Cap() int { return r.max }

// Len reports how many cgroups are cached.
func (r *CgroupResolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cur) + len(r.old)
}

// Path returns the cgroup path of id relative to the cgroup2 root ("/" for
// the root itself), or "" and why it is not known. A hit does not allocate.
func (r *CgroupResolver) Path(id uint64) (path, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.cur[id]; ok {
		return p, ""
	}
	if p, ok := r.old[id]; ok {
		r.store(id, p)
		return p, ""
	}
	p, why := r.fromKernel(id)
	if p == "" {
		var whyHandle string
		if p, whyHandle = r.fromHandle(id); p == "" {
			r.Unresolved.Add(1)
			return "", why + "; " + whyHandle
		}
		r.FromHandle.Add(1)
	} else {
		r.FromKernel.Add(1)
	}
	r.store(id, p)
	return p, ""
}

func (r *CgroupResolver) store(id uint64, p string) {
	if len(r.cur) >= r.max/2 {
		r.old, r.cur = r.cur, make(map[uint64]string, r.max/2)
	}
	r.cur[id] = p
}

// fromKernel builds the path from the BPF program's record.
func (r *CgroupResolver) fromKernel(id uint64) (string, string) {
	if r.kernel == nil {
		return "", "no kernel record"
	}
	found, err := r.kernel.LookupCgroup(id, &r.scratch)
	switch {
	case err != nil:
		return "", "kernel record unreadable: " + err.Error()
	case !found:
		return "", "not in the kernel's record (evicted, or never failed)"
	case r.scratch.Flags&tracer.CgroupDeep != 0:
		return "", "deeper than the kernel's record keeps"
	case r.scratch.Flags&tracer.CgroupLong != 0:
		return "", "a name longer than the kernel's record keeps"
	}
	return CgroupPathString(&r.scratch), ""
}

// CgroupPathString joins a kernel record, root first.
func CgroupPathString(p *tracer.CgroupPath) string {
	depth := min(int(p.Depth), len(p.Names))
	if depth == 0 {
		return "/"
	}
	var buf [tracer.CgroupPathMax]byte
	b := buf[:0]
	for i := depth - 1; i >= 0; i-- {
		b = append(b, '/')
		for _, c := range p.Names[i] {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
	}
	return string(b)
}

// fileIDKernfs is FILEID_KERNFS (include/linux/exportfs.h): an 8-byte
// handle that is the kernfs node id, which is the cgroup id.
const fileIDKernfs = 0xfe

// fromHandle opens the cgroup by its id and reads back its path.
func (r *CgroupResolver) fromHandle(id uint64) (string, string) {
	if r.mountFD < 0 {
		return "", "cgroup2 mount not open"
	}
	var h [8]byte
	binary.NativeEndian.PutUint64(h[:], id)
	fd, err := unix.OpenByHandleAt(r.mountFD, unix.NewFileHandle(fileIDKernfs, h[:]), unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT) {
			return "", "the cgroup no longer exists"
		}
		return "", "open_by_handle_at: " + err.Error() + " (needs CAP_DAC_READ_SEARCH)"
	}
	defer unix.Close(fd)
	var buf [4096]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return "", "readlink of the cgroup: " + err.Error()
	}
	rel, ok := strings.CutPrefix(string(buf[:n]), r.root)
	if !ok || (rel != "" && rel[0] != '/') || strings.HasSuffix(rel, " (deleted)") {
		return "", "the cgroup is outside the mount or was removed while named"
	}
	if rel == "" {
		rel = "/"
	}
	return rel, ""
}

// CgroupV1Mounted is true when a cgroup v1 hierarchy is mounted (a hybrid or
// v1 host): the cgroup v2 root then says nothing about a process's pod.
func CgroupV1Mounted() bool {
	mounts, err := mountinfo.Self()
	if err != nil {
		return true // cannot tell: do not take the v2 root for an answer
	}
	for _, m := range mounts {
		if m.FSType == "cgroup" {
			return true
		}
	}
	return false
}

// errNoCgroup2 is returned when the mount table has no cgroup2 entry.
var errNoCgroup2 = errors.New("no cgroup2 filesystem mounted (cgroup v2 is required to resolve cgroup ids; " +
	"on hybrid hosts it is usually at /sys/fs/cgroup/unified, or mount it with `mount -t cgroup2 none /sys/fs/cgroup`)")

// findCgroup2Mount returns the mount point of the cgroup2 filesystem listed
// in the mountinfo text. A mount of the hierarchy root ("/") is preferred over
// bind mounts of a sub-tree; otherwise the first cgroup2 mount wins.
func findCgroup2Mount(rd io.Reader) (string, error) {
	mounts, err := mountinfo.Parse(rd)
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
