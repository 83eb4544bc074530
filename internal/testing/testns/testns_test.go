package testns

import (
	"errors"
	"os"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestNewIsFreshAndClosedAtCleanup: the namespace is not the test's own, and
// it is closed once the test that made it ends.
func TestNewIsFreshAndClosedAtCleanup(t *testing.T) {
	testenv.RequireRoot(t) // else New skips the subtest, and this one has nothing to check
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var ns *netns.NS
	t.Run("make", func(t *testing.T) {
		ns = New(t)
		if ns.String() == own {
			t.Fatalf("New gave the test's own namespace %s", own)
		}
		if err := ns.Do(func() error { return nil }); err != nil {
			t.Fatalf("the new namespace cannot be entered: %v", err)
		}
	})
	if ns == nil {
		t.Fatal("no namespace was made")
	}
	err = ns.Do(func() error { return nil })
	if !errors.Is(err, netns.ErrClosed) {
		t.Fatalf("after its test ended the namespace %s is still open: Do returned %v", ns, err)
	}
}
