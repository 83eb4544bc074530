// Package buildcache is what the test tiers' caches of programs built from
// the Go module proxy share (internal/testing/kubetest's Kubernetes binaries,
// internal/testing/helmtest's helm, internal/testing/otelcol's collector): the one build flow
// (Build: under a file lock that serialises builds across test binaries, a
// program renamed into place only when complete), the checks that tell a
// cached program from one to build, and the tail of a log for errors.
package buildcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/testenv"
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

// Dir is the cache directory a tool's environment variable env names, or
// def when env is unset or empty.
func Dir(env, def string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	return def
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

// Ensure returns bin, the cached program what ("helm v3.22.0"), building
// it first with build when it is not there, within the test's deadline less
// 30 s. It skips (testenv.Skip: a failure under EADDR_REQUIRE_BPF=1) when
// bin is missing and cannot be built here: no Go toolchain on PATH, or a
// cacheDir this user cannot write (makeTarget, run as root, builds it
// there). A failed build fails the test with build's error.
func Ensure(t testing.TB, what, bin, cacheDir, makeTarget string, build func(ctx context.Context, logf func(string, ...any)) error) string {
	t.Helper()
	if IsExecutable(bin) {
		return bin
	}
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skip(t, fmt.Sprintf("no Go toolchain on PATH to build %s into %s: %v", what, bin, err))
	}
	if err := WritableDir(cacheDir); err != nil {
		testenv.Skip(t, fmt.Sprintf("%s is not built and cannot be built here (`%s` as root builds it): %v", what, makeTarget, err))
	}
	ctx := context.Background()
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
			defer cancel()
		}
	}
	begin := time.Now()
	if err := build(ctx, func(format string, args ...any) { t.Logf(format, args...) }); err != nil {
		t.Fatalf("building %s: %v", what, err)
	}
	t.Logf("%s ready after %s: %s", what, time.Since(begin).Round(time.Second), bin)
	return bin
}

// Go runs the go commands of one build in Dir (a wrapper module), each
// logged with its output to Log, with the settings a reproducible static
// build of someone else's module needs.
type Go struct {
	Ctx     context.Context
	Bin     string // the go command
	Dir     string
	Log     *os.File
	LogPath string
}

// Run runs `go args...` and returns its standard output; a failure says
// which command and ends with the log's tail.
func (g *Go) Run(args ...string) ([]byte, error) {
	fmt.Fprintf(g.Log, "$ go %s\n", strings.Join(args, " "))
	var stdout bytes.Buffer
	cmd := exec.CommandContext(g.Ctx, g.Bin, args...)
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(),
		"GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOTOOLCHAIN=local",
		"GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	cmd.Stdout = io.MultiWriter(&stdout, g.Log)
	cmd.Stderr = g.Log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w (log: %s)\n%s", strings.Join(args, " "), err, g.LogPath, Tail(g.LogPath, 30))
	}
	return stdout.Bytes(), nil
}
