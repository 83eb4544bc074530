package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=..." (make
// build: git describe and git rev-parse HEAD). Left empty, the commit comes
// from the Go toolchain's VCS stamp, when it made one; left "dev", the
// version is dev and that commit.
var version, commit = "dev", ""

// buildInfo is what `eaddr version` prints: the version, the commit and
// whether the tree had changes, the commit's time, and the Go toolchain.
type buildInfo struct {
	Version, Commit, Time, Go string
	Modified                  bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok && commit == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "dev" && len(b.Commit) >= 12 {
		b.Version = "dev-" + b.Commit[:12]
	}
	return b
}

func writeVersion(w io.Writer) {
	b := readBuildInfo()
	fmt.Fprintf(w, "eaddr %s\n", b.Version)
	if b.Commit != "" {
		mod := ""
		if b.Modified {
			mod = " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "commit: %s%s\n", b.Commit, mod)
	} else {
		fmt.Fprintln(w, "commit: unknown (built without version control information)")
	}
	if b.Time != "" {
		fmt.Fprintf(w, "commit time: %s\n", b.Time)
	}
	fmt.Fprintf(w, "go: %s\n", b.Go)
}
