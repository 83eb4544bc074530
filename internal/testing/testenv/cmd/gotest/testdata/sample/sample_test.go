// Package sample is run by gotest's own test: one test of each outcome.
package sample

import (
	"os"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func TestPasses(t *testing.T) { t.Log("not printed: the test passed") }

func TestNeedsPackage(t *testing.T) {
	testenv.Missing(t, "frobnicator", "frob-tools")
}

func TestSubtests(t *testing.T) {
	t.Run("passes", func(t *testing.T) {})
	t.Run("needs-root", func(t *testing.T) {
		testenv.Skip(t, "test requires root (euid 0), running as euid 1000")
	})
	t.Run("other", func(t *testing.T) { t.Skip("the moon is full") })
}

func TestFails(t *testing.T) {
	if os.Getenv("GOTEST_SAMPLE_FAIL") == "1" {
		t.Error("printed: the test failed")
	}
}
