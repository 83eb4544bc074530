// Package buildcache is what the test tiers' caches of programs built from
// the Go module proxy share (internal/kubetest's Kubernetes binaries,
// internal/helmtest's helm, internal/otelcol's collector): a file lock that
// serialises builds across test binaries, the checks that tell a cached
// program from one to build, and the tail of a log for errors.
package buildcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Lock takes an exclusive flock on path (made if missing), waiting within
// ctx while another process holds it; what says what that process is doing,
// logged once through logf ("building helm"). The returned func releases it.
func Lock(ctx context.Context, path, what string, logf func(format string, args ...any)) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if !waited {
			logf("another process is %s (%s is locked): waiting", what, path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// WritableDir is nil when dir exists and this process may create files in
// it, or when it does not exist and its nearest existing parent allows that.
func WritableDir(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			if err := syscall.Access(d, 2 /* W_OK */); err != nil {
				return fmt.Errorf("%s: not writable by euid %d: %w", d, os.Geteuid(), err)
			}
			return nil
		}
		if d == filepath.Dir(d) {
			return fmt.Errorf("%s: no existing parent", dir)
		}
	}
}

// IsExecutable: path is a regular file with an execute bit.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
