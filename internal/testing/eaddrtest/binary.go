// Package eaddrtest is the harness of eaddr's end-to-end tests, which run
// the eaddr binary as a user would: Main builds it once per test binary;
// StartTrace runs `eaddr trace` and reads its events into the Event mirror
// of docs/events.md; the rest makes the failures to trace (exhausted
// network namespaces, real clients, cgroups and pods, a kube-apiserver's
// Events, Prometheus, tmux) and reads what eaddr made of them. The CLI's own
// tests (cmd/eaddr) and the tiers under e2e/ share it.
package eaddrtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EaddrBin is the eaddr binary Main built.
var EaddrBin string

// Main builds eaddr (./cmd/eaddr of this module) into a temporary directory
// for the tests that run it, runs them, removes it and exits: a test
// package's TestMain calls it.
func Main(m *testing.M) { os.Exit(RunWithBinary(m)) }

// BinEnv names an eaddr binary already built from this tree, which Main
// copies instead of building one: the Makefile's test targets build it once
// for all the test binaries they run (make test, make test-race), where
// each package's build of its own cost seconds, and a minute as an
// unprivileged user with an empty build cache. Unset, Main builds.
const BinEnv = "EADDR_TEST_BIN"

// RunWithBinary is Main without the exit: it builds eaddr (or copies
// $EADDR_TEST_BIN), runs the tests and removes it, and returns m.Run's
// code, for a TestMain that does more (e2e/apiserver's runs in deploy/).
func RunWithBinary(m *testing.M) int {
	dir, err := os.MkdirTemp("", "eaddr-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755) // TestTraceWithoutRoot runs it as nobody
	EaddrBin = filepath.Join(dir, "eaddr")
	if err := placeBinary(EaddrBin, os.Getenv(BinEnv)); err != nil {
		panic(err)
	}
	return m.Run()
}

// placeBinary builds eaddr at dst, or copies prebuilt there when it is
// set, executable by everyone.
func placeBinary(dst, prebuilt string) error {
	if prebuilt == "" {
		build := exec.Command("go", "build", "-o", dst, "github.com/eaddr/eaddr/cmd/eaddr")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building eaddr: %w", err)
		}
		return nil
	}
	b, err := os.ReadFile(prebuilt)
	if err != nil {
		return fmt.Errorf("%s: %w", BinEnv, err)
	}
	return os.WriteFile(dst, b, 0o755)
}
