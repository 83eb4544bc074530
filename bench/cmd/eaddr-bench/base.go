package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildBase builds bin/eaddr of revision rev (-base) as `make build` does,
// in a temporary git worktree that is removed as soon as the binary is
// built (also when the build fails or ctx is cancelled). The binary lives in
// a temporary directory that remove takes away. desc names the revision:
// its short hash and subject.
func buildBase(ctx context.Context, goTool, rev string) (bin, desc string, remove func(), err error) {
	top, err := gitOut(ctx, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", nil, fmt.Errorf("-base needs the driver to run inside the repository: %w", err)
	}
	hash, err := gitOut(ctx, top, "rev-parse", "--verify", "--short", rev+"^{commit}")
	if err != nil {
		return "", "", nil, fmt.Errorf("-base %s: %w", rev, err)
	}
	subject, _ := gitOut(ctx, top, "log", "-1", "--format=%s", hash)
	if len(subject) > 60 {
		subject = subject[:60] + "…"
	}
	dir, err := os.MkdirTemp("", "eaddr-bench-base-")
	if err != nil {
		return "", "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	wt := filepath.Join(dir, "src")
	if _, err := gitOut(ctx, top, "worktree", "add", "--detach", wt, hash); err != nil {
		remove()
		return "", "", nil, err
	}
	// The worktree goes with its build, whatever happens; context.Background:
	// a cancelled ctx must not stop the cleanup.
	defer func() {
		if _, err := gitOut(context.Background(), top, "worktree", "remove", "--force", wt); err != nil {
			os.RemoveAll(wt)
			gitOut(context.Background(), top, "worktree", "prune")
		}
	}()
	bin = filepath.Join(dir, "eaddr")
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-ldflags", "-s -w -X main.version=base-"+hash, "-o", bin, "./cmd/eaddr")
	cmd.Dir = wt
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := combinedOutput(cmd); err != nil {
		remove()
		return "", "", nil, fmt.Errorf("building eaddr at %s: %v: %s", hash, err, lastLines(string(out), 10))
	}
	return bin, hash + " (" + subject + ")", remove, nil
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
