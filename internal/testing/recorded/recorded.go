// Package recorded reads the raw events recorded from real clients in
// testdata/events (testdata/events/README.md), for the tests of the stages
// that decode, explain and render them.
package recorded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// Dir is testdata/events of this repository, wherever the test runs.
func Dir() string {
	return filepath.Join(testenv.Root(), "testdata", "events")
}

// Raw reads the recorded event name (its file without .bin).
func Raw(t testing.TB, name string) *tracer.RawEvent {
	t.Helper()
	return RawFile(t, filepath.Join(Dir(), name+".bin"))
}

// RawFile reads a recorded event from its path.
func RawFile(t testing.TB, path string) *tracer.RawEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw tracer.RawEvent
	if err := raw.UnmarshalBinary(b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &raw
}
