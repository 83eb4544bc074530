// Package testns gives a test a throwaway network namespace: the one way the
// tests outside internal/netns make one (netns's own tests make theirs with
// netns.New, which they test).
package testns

import (
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// New returns a fresh network namespace with only lo up; the test's handle on
// it is closed when the test ends, so the namespace, its rules and sysctls go
// once no process or socket holds it. It skips (testenv: a
// failure under EADDR_REQUIRE_BPF=1) when not root, and fails the test when
// the namespace cannot be made.
func New(t testing.TB) *netns.NS {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("netns.New: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}
