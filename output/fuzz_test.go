package output

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/tracer"
)

// FuzzDecodeRaw: any bytes the ring could hold decode, explain and write to
// valid JSON and a table row, without a panic. Seeds: testdata/events.
func FuzzDecodeRaw(f *testing.F) {
	bins, _ := filepath.Glob("../testdata/events/*.bin")
	for _, b := range bins {
		if raw, err := os.ReadFile(b); err == nil {
			f.Add(raw)
		}
	}
	d := decode.NewDecoder(nil)
	x, _ := explain.NewExplainer()
	var w Events
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw tracer.RawEvent
		if err := raw.UnmarshalBinary(b); err != nil {
			return
		}
		var ev decode.Event
		d.Decode(&raw, &ev)
		var ex explain.Explanation
		x.Explain(&ev, &ex, true)
		out := w.Append(nil, &ev, "n", &ex, nil)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %x: %s", b, out)
		}
		_ = AppendTable(nil, &ev)
	})
}
