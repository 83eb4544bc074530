// Package hungfs is a FUSE file system for tests whose reads never return
// for one process: it serves files from memory to every other process (an
// exec from it works, through the page cache), and to the process it is
// told to hang it answers open with direct I/O, so that every read goes to
// the daemon, and then does not answer the read until Release. A hung
// NFS, CSI or FUSE volume does that to whoever reads it; this one does it
// to eaddr only, after the client that runs from it has been loaded.
package hungfs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// FS is a mounted hungfs.
type FS struct {
	Dir     string // the mount point
	server  *fuse.Server
	hangFor atomic.Int64 // the process (tgid) whose reads hang; 0: none
	hung    atomic.Int64 // reads hanging now
	release chan struct{}
	once    sync.Once
}

// Mount mounts files (path → content, mode 0755) on a new directory. At
// cleanup it releases the hung reads and unmounts; a mount that does not
// go is aborted (umount -f) and detached. Register
// it after whatever must stop while reads still hang cannot: cleanups run
// last first.
func Mount(t *testing.T, files map[string][]byte) *FS {
	t.Helper()
	testenv.RequireRoot(t)
	if fss, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fss), "\tfuse\n") {
		testenv.Skip(t, "the kernel has no FUSE file system (modprobe fuse)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.Skip(t, "no /dev/fuse: "+err.Error())
	}
	h := &FS{Dir: t.TempDir(), release: make(chan struct{})}
	root := &dir{h: h, files: files}
	server, err := fs.Mount(h.Dir, root, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, FsName: "hungfs", Name: "hungfs", DisableXAttrs: true}})
	if err != nil {
		t.Fatalf("mounting a FUSE file system on %s: %v (needs root and /dev/fuse)", h.Dir, err)
	}
	h.server = server
	t.Cleanup(func() { h.unmount(t) })
	return h
}

// Argv runs path with args through /bin/sh, for an exec.Cmd or a netns
// start: never exec a file of the mount from the process that serves it.
// Go's exec forks with vfork: the forking thread holds its P until the
// child's execve returns, and the child's execve waits for this daemon; a
// garbage collection that stops the world then waits for that thread, and
// the daemon for the collection: a deadlock (the child asks the daemon,
// the daemon waits for the world, the world for the child). /bin/sh is
// not on the mount, so the fork returns before anything is asked of it.
func Argv(path string, args ...string) []string {
	return append([]string{"/bin/sh", "-c", `exec "$0" "$@"`, path}, args...)
}

// HangFor makes every read by process pid (any of its threads) hang from
// now on, until Release.
func (h *FS) HangFor(pid int) { h.hangFor.Store(int64(pid)) }

// Hung is the number of reads hanging now.
func (h *FS) Hung() int { return int(h.hung.Load()) }

// Release answers the hung reads, and no read hangs after it.
func (h *FS) Release() { h.once.Do(func() { close(h.release) }) }

func (h *FS) unmount(t *testing.T) {
	h.Release()
	err := h.server.Unmount()
	if err == nil {
		return
	}
	// MNT_FORCE aborts the FUSE connection before anything else
	// (fuse_umount_begin), as /sys/fs/fuse/connections/N/abort does where
	// fusectl is mounted: every request waiting for the daemon fails.
	t.Logf("unmounting %s: %v; aborting the FUSE connection (umount -f)", h.Dir, err)
	if err := unix.Unmount(h.Dir, unix.MNT_FORCE); err == nil {
		return
	}
	if err := unix.Unmount(h.Dir, unix.MNT_DETACH); err != nil {
		t.Errorf("detaching %s: %v", h.Dir, err)
	}
}

// hangs reports whether the caller of ctx is the process to hang.
func (h *FS) hangs(ctx context.Context) bool {
	want := h.hangFor.Load()
	select {
	case <-h.release:
		return false
	default:
	}
	c, ok := fuse.FromContext(ctx)
	return ok && want != 0 && tgid(c.Pid) == want
}

// tgid is the process of thread tid.
func tgid(tid uint32) int64 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// dir is the root: it makes the files and their directories.
type dir struct {
	fs.Inode
	h     *FS
	files map[string][]byte
}

var _ = (fs.NodeOnAdder)((*dir)(nil))

func (d *dir) OnAdd(ctx context.Context) {
	for name, data := range d.files {
		p := &d.Inode
		parts := strings.Split(filepath.Clean(name), "/")
		for _, part := range parts[:len(parts)-1] {
			ch := p.GetChild(part)
			if ch == nil {
				ch = p.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFDIR})
				p.AddChild(part, ch, true)
			}
			p = ch
		}
		f := &file{h: d.h, data: data}
		p.AddChild(parts[len(parts)-1], p.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG}), true)
	}
}

// file is one file's content.
type file struct {
	fs.Inode
	h    *FS
	data []byte
}

var (
	_ = (fs.NodeGetattrer)((*file)(nil))
	_ = (fs.NodeOpener)((*file)(nil))
	_ = (fs.NodeReader)((*file)(nil))
)

func (f *file) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o755
	out.Size = uint64(len(f.data))
	return 0
}

// Open: the process to hang reads past the page cache, everyone else
// through it.
func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	if f.h.hangs(ctx) {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *file) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if f.h.hangs(ctx) {
		f.h.hung.Add(1)
		<-f.h.release
		f.h.hung.Add(-1)
	}
	if off >= int64(len(f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(f.data[off:min(off+int64(len(dest)), int64(len(f.data)))]), 0
}
