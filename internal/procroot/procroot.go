// Package procroot opens files as a process sees them: beneath its root
// (/proc/PID/root), every symlink resolved inside that root
// (openat2 RESOLVE_IN_ROOT) and /proc magic links refused. explain opens a
// container's binaries with it, diagnose a unix socket's path.
package procroot

import (
	"errors"
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
// process (another mount namespace). The namespace, the cwd and the root are
// read through one handle on /proc/PID, which names that process only: if it
// exits meanwhile and its pid is reused, they fail instead of reading the new
// process's.
func Process(pid int, mnt uint32, path string) (root int, abs string, err error) {
	if pid <= 0 {
		return -1, "", unix.ESRCH
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", unix.ESRCH
	}
	defer unix.Close(dir)
	if mnt != 0 {
		if link, err := readlinkAt(dir, "ns/mnt"); err != nil || link != "mnt:["+strconv.FormatUint(uint64(mnt), 10)+"]" {
			return -1, "", unix.ESRCH
		}
	}
	if !strings.HasPrefix(path, "/") {
		cwd, err := readlinkAt(dir, "cwd")
		if err != nil {
			return -1, "", err
		}
		path = cwd + "/" + path
	}
	root, err = unix.Openat(dir, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return root, path, err
}

func readlinkAt(dir int, name string) (string, error) {
	b := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if n < len(b) {
			return string(b[:n]), nil
		}
		if len(b) >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
		b = make([]byte, 2*len(b))
	}
}

// Reopen opens for reading (flags) the file that the O_PATH descriptor fd
// holds, through /proc/self/fd: the same inode, whatever its path names
// now, without resolving the path again.
func Reopen(fd int, flags int) (int, error) {
	for {
		nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), flags, 0)
		if err != unix.EINTR {
			return nfd, err
		}
	}
}

// Unavailable reports whether err is openat2 saying it is missing (before
// 5.6: ENOSYS; E2BIG or EINVAL for a struct or flag it does not know) or
// filtered (seccomp: EPERM, or ENOSYS). Nothing is opened then: no caller
// falls back to a plain open, which would follow the container's symlinks
// on the host.
func Unavailable(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.E2BIG) || errors.Is(err, unix.EINVAL)
}
