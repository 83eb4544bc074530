package buildcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Build runs build once, renames what it wrote into place, and then finds
// it cached; a failed build leaves neither the program nor its temporary
// file.
func TestBuildOnceAndComplete(t *testing.T) {
	dir := t.TempDir()
	j := Job{Dir: filepath.Join(dir, "cache"), Lock: "build.lock", What: "prog", Bin: filepath.Join(dir, "cache", "prog"), LogPath: filepath.Join(dir, "build.log")}
	builds := 0
	build := func(g *Go, tmp string) error {
		builds++
		if g.Dir != j.Dir || g.Log == nil {
			t.Errorf("go runs in %q, log %v; want %q and the job's log", g.Dir, g.Log, j.Dir)
		}
		return os.WriteFile(tmp, []byte("#!/bin/sh\n"), 0o755)
	}
	for range 2 {
		if err := Build(context.Background(), j, t.Logf, build); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 1 || !IsExecutable(j.Bin) {
		t.Errorf("%d builds, %s executable: %v; want 1 and true", builds, j.Bin, IsExecutable(j.Bin))
	}

	j.Bin = filepath.Join(dir, "cache", "broken")
	failed := errors.New("compile error")
	err := Build(context.Background(), j, t.Logf, func(g *Go, tmp string) error {
		os.WriteFile(tmp, []byte("half"), 0o755)
		return failed
	})
	if !errors.Is(err, failed) {
		t.Errorf("Build: %v, want the build's error", err)
	}
	for _, p := range []string{j.Bin, j.Bin + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after a failed build (%v)", p, err)
		}
	}
}

// Dir: the environment variable when set and not empty, else the default.
func TestDir(t *testing.T) {
	const env = "EADDR_TEST_BUILDCACHE_DIR"
	t.Setenv(env, "")
	if d := Dir(env, "/var/cache/x"); d != "/var/cache/x" {
		t.Errorf("empty %s: Dir = %q, want the default", env, d)
	}
	t.Setenv(env, "/tmp/elsewhere")
	if d := Dir(env, "/var/cache/x"); d != "/tmp/elsewhere" {
		t.Errorf("%s=/tmp/elsewhere: Dir = %q", env, d)
	}
}
