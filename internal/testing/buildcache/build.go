package buildcache

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Job is one program built from the Go module proxy into a cache.
type Job struct {
	Dir     string // the cache directory, made if missing
	Lock    string // the name of the lock file in Dir that serialises the builds
	What    string // what is built, for the log: "helm v3.22.0"
	Bin     string // where the program goes
	LogPath string // the build's log
	SrcDir  string // where the go commands run (a wrapper module), made if missing; "" is Dir
}

// Build builds j.Bin unless it is there, under an flock on j.Lock, so that
// test binaries running side by side build it once (one waits, then finds
// it built). build writes the program to tmp with g, whose go commands run
// in j.SrcDir and are logged to j.LogPath; Build renames tmp into place,
// so that j.Bin is only ever a complete program.
func Build(ctx context.Context, j Job, logf func(format string, args ...any), build func(g *Go, tmp string) error) error {
	if err := os.MkdirAll(j.Dir, 0o755); err != nil {
		return err
	}
	unlock, err := Lock(ctx, filepath.Join(j.Dir, j.Lock), "building "+j.What, logf)
	if err != nil {
		return err
	}
	defer unlock()
	if IsExecutable(j.Bin) {
		return nil // cached, or built by the holder of the lock we waited for
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return err
	}
	src := j.SrcDir
	if src == "" {
		src = j.Dir
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	log, err := os.Create(j.LogPath)
	if err != nil {
		return err
	}
	defer log.Close()
	logf("building %s into %s (log: %s)", j.What, j.Bin, j.LogPath)
	begin := time.Now()
	tmp := j.Bin + ".tmp"
	if err := build(&Go{Ctx: ctx, Bin: goBin, Dir: src, Log: log, LogPath: j.LogPath}, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	took := time.Since(begin).Round(time.Second)
	fmt.Fprintf(log, "# built in %s\n", took)
	logf("%s built in %s", j.What, took)
	return os.Rename(tmp, j.Bin)
}
