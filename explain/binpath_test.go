package explain

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/procroot"
)

// analyzeBinaryPath opens the file at path as the Finder opens a binary
// (O_PATH, then for reading only if it is a regular file) and classifies
// it (analyzeBinaryFile). /proc/PID/exe is the kernel's link; a path under
// /proc/PID/root is resolved beneath that root, any other beneath the
// test's own root: always openat2 RESOLVE_IN_ROOT, as in the Finder. Name
// is the base name of the file opened, after all symlinks.
func analyzeBinaryPath(path string) (BinaryInfo, error) {
	f, err := openTestBinary(path)
	if err != nil {
		return BinaryInfo{}, err
	}
	defer f.Close()
	return analyzeBinaryFile(f, openedName(f, path))
}

func openTestBinary(path string) (*os.File, error) {
	if strings.HasPrefix(path, "/proc/") && strings.HasSuffix(path, "/exe") {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		defer unix.Close(fd)
		return openChecked(fd, nil)
	}
	root, rel, ok := procroot.Split(path)
	if !ok {
		root, rel = "/", path
	}
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	return openInRoot(dir, rel, nil)
}
