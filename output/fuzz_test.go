package output

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/tracer"
)

// FuzzDecodeRaw: any bytes the ring could hold decode, explain and write to
// valid JSON, and to text and a table row within the terminal's width with
// nothing a terminal acts on, without a panic. Seeds: testdata/events.
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
	h := Human{Width: func() int { return 80 }}
	g := &diagnose.Diagnosis{Verdict: "v", Fix: []string{"f"}}
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
		lines(t, string(h.AppendText(nil, &ev, &ex, g)), 80)
		lines(t, string(h.AppendRow(nil, &ev, &ex, g)), 80)
	})
}
