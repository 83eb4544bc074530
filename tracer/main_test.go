package tracer

import (
	"os"
	"testing"
)

// TestMain runs the tests, or, with takerEnv set, is TestAsyncErrorTaken's
// taker process (takerMain).
func TestMain(m *testing.M) {
	if os.Getenv(takerEnv) != "" {
		os.Exit(takerMain())
	}
	os.Exit(m.Run())
}
