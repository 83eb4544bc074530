// Package procroot opens files as a process sees them: beneath its root
// (/proc/PID/root), every symlink resolved inside that root
// (openat2 RESOLVE_IN_ROOT) and /proc magic links refused. explain opens a
// container's binaries with it, diagnose a unix socket's path.
package procroot

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenAt opens rel beneath the directory dirfd as if dirfd were "/". It
// retries EINTR, and EAGAIN (the kernel saw a concurrent rename or mount
// during the walk) a few times. ENOSYS, EPERM, EINVAL or E2BIG say openat2
// is missing (before 5.6) or filtered.
func OpenAt(dirfd int, rel string, flags int) (int, error) {
	rel = strings.TrimLeft(rel, "/")
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if (err != unix.EINTR && err != unix.EAGAIN) || try == 8 {
			return fd, err
		}
	}
}

// Open opens rel beneath the directory root, as OpenAt.
func Open(root, rel string, flags int) (int, error) {
	dirfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dirfd)
	return OpenAt(dirfd, rel, flags)
}

// Split splits "/proc/PID/root/rest" (PID may be "self" or "thread-self")
// into "/proc/PID/root" and "rest". ok is false for any other path, and for
// the root directory itself.
func Split(path string) (root, rel string, ok bool) {
	path = filepath.Clean(path)
	rest, ok := strings.CutPrefix(path, "/proc/")
	if !ok {
		return "", "", false
	}
	pid, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	if pid != "self" && pid != "thread-self" {
		if _, err := strconv.ParseUint(pid, 10, 32); err != nil {
			return "", "", false
		}
	}
	rel, ok = strings.CutPrefix(rest, "root/")
	if !ok || rel == "" {
		return "", "", false
	}
	return "/proc/" + pid + "/root", rel, true
}

// Process opens /proc/PID/root (O_PATH) of a process in mount namespace mnt
// (0: any) and makes path absolute in it: a relative path is taken from the
// process's cwd. ESRCH: the process is gone, or its pid now names another
// process (another mount namespace).
func Process(pid int, mnt uint32, path string) (root int, abs string, err error) {
	if pid <= 0 {
		return -1, "", unix.ESRCH
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if mnt != 0 {
		if link, err := os.Readlink(proc + "/ns/mnt"); err != nil || link != "mnt:["+strconv.FormatUint(uint64(mnt), 10)+"]" {
			return -1, "", unix.ESRCH
		}
	}
	if !strings.HasPrefix(path, "/") {
		cwd, err := os.Readlink(proc + "/cwd")
		if err != nil {
			return -1, "", err
		}
		path = cwd + "/" + path
	}
	root, err = unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return root, path, err
}
