// Package eaddrtest is the harness of eaddr's end-to-end tests, which run
// the eaddr binary as a user would: Main builds it once per test binary;
// StartTrace runs `eaddr trace` and reads its events into the Event mirror
// of docs/events.md; the rest makes the failures to trace (exhausted
// network namespaces, real clients, cgroups and pods, a kube-apiserver's
// Events, Prometheus, tmux) and reads what eaddr made of them. The CLI's own
// tests (cmd/eaddr) and the tiers under e2e/ share it.
package eaddrtest

import (
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
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "eaddr-test-")
	if err != nil {
		panic(err)
	}
	_ = os.Chmod(dir, 0o755) // TestTraceWithoutRoot runs it as nobody
	EaddrBin = filepath.Join(dir, "eaddr")
	build := exec.Command("go", "build", "-o", EaddrBin, "github.com/eaddr/eaddr/cmd/eaddr")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building eaddr: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
