package decode

import (
	"os"
	"testing"

	"github.com/eaddr/eaddr/tracer"
)

// User-space cost per event: decode, explain, JSON. `make bench` runs these.
func benchEvent(b *testing.B, explain, wordings bool) {
	raw, err := os.ReadFile("../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin")
	if err != nil {
		b.Fatal(err)
	}
	var r tracer.RawEvent
	if err := r.UnmarshalBinary(raw); err != nil {
		b.Fatal(err)
	}
	d := fixedDecoder()
	x, _ := NewExplainer()
	var ev Event
	d.Decode(&r, &ev)
	x.Detector.remember(&ev, BinaryInfo{Runtime: "busybox", Libc: LibcGlibc})
	var ex Explanation
	buf := make([]byte, 0, 16384)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(&r, &ev)
		if explain {
			x.Explain(&ev, &ex)
			buf = x.appendJSONExplained(buf[:0], &ev, "node-a", &ex, wordings)
		} else {
			buf = appendJSON(buf[:0], &ev, "node-a")
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEventJSON(b *testing.B)             { benchEvent(b, false, false) }
func BenchmarkEventJSONExplainShort(b *testing.B) { benchEvent(b, true, false) }
func BenchmarkEventJSONExplainFull(b *testing.B)  { benchEvent(b, true, true) }
