package explain

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/tracer"
)

// FuzzExplainRaw: any bytes the ring could hold decode and explain to valid
// JSON, without a panic. Seeds: the recorded events of testdata/events.
func FuzzExplainRaw(f *testing.F) {
	bins, _ := filepath.Glob("../testdata/events/*.bin")
	for _, b := range bins {
		if raw, err := os.ReadFile(b); err == nil {
			f.Add(raw)
		}
	}
	d := decode.NewDecoder(nil)
	x, _ := NewExplainer()
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw tracer.RawEvent
		if err := raw.UnmarshalBinary(b); err != nil {
			return
		}
		var ev decode.Event
		d.Decode(&raw, &ev)
		var ex Explanation
		x.Explain(&ev, &ex)
		out := AppendEvent(nil, &ev, "n", x, &ex, true, nil)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %x: %s", b, out)
		}
	})
}

// FuzzIdentify: any pasted text is either recognised with a sane errno or
// not, and never panics. Seeds: testdata/fuzz/identify.txt.
func FuzzIdentify(f *testing.F) {
	if fh, err := os.Open("../testdata/fuzz/identify.txt"); err == nil {
		s := bufio.NewScanner(fh)
		for s.Scan() {
			f.Add(s.Text())
		}
		fh.Close()
	}
	c, err := LoadCatalog()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, id := range c.Identify(in) {
			if id.Errno < 0 || id.Errno > 255 {
				t.Fatalf("%q: errno %d", in, id.Errno)
			}
		}
		c.Closest(in, 3)
	})
}
