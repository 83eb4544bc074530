// Package testenv holds helpers that decide whether a test can run in the
// current environment.
//
// By default a missing prerequisite (root, a client binary, ...) skips the
// test. Setting EADDR_REQUIRE_BPF=1 turns every such skip into a failure, so a
// CI job that is supposed to exercise the privileged paths cannot go green by
// silently skipping them.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// RequireEnv is the environment variable that turns skips into failures when
// set to "1".
const RequireEnv = "EADDR_REQUIRE_BPF"

// RequireRoot skips the test with a clear reason when not running as root
// (euid 0), unless the environment variable EADDR_REQUIRE_BPF=1 is set, in
// which case it fails the test (t.Fatalf) with the same reason.
func RequireRoot(t testing.TB) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		Skip(t, fmt.Sprintf("test requires root (euid 0), running as euid %d", euid))
	}
}

// Skip skips with reason, or fails under EADDR_REQUIRE_BPF=1 (for other
// missing prerequisites, e.g. a client binary not installed).
func Skip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (failing instead of skipping because %s=1)", reason, RequireEnv)
	}
	t.Skip(reason)
}
