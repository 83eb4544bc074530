package decode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/tracer"
)

// FuzzDecodeRaw: any bytes the ring could hold decode to an Event whose JSON
// is valid (explain.FuzzExplainRaw adds the explanation), without a panic. Seeds: the recorded events of testdata/events.
func FuzzDecodeRaw(f *testing.F) {
	bins, _ := filepath.Glob("../testdata/events/*.bin")
	for _, b := range bins {
		if raw, err := os.ReadFile(b); err == nil {
			f.Add(raw)
		}
	}
	d := fixedDecoder()
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw tracer.RawEvent
		if err := raw.UnmarshalBinary(b); err != nil {
			return
		}
		var ev Event
		d.Decode(&raw, &ev)
		out := appendJSON(nil, &ev, "n")
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %x: %s", b, out)
		}
		_ = AppendTable(nil, &ev)
	})
}
