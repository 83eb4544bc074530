package explain

import (
	"os"
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/tracer"
)

// User-space cost per event: decode, explain, JSON. `make bench` runs these.
func benchEvent(b *testing.B, wordings bool) {
	raw, err := os.ReadFile("../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin")
	if err != nil {
		b.Fatal(err)
	}
	var r tracer.RawEvent
	if err := r.UnmarshalBinary(raw); err != nil {
		b.Fatal(err)
	}
	d := decode.NewDecoder(nil)
	x, _ := NewExplainer()
	var ev decode.Event
	d.Decode(&r, &ev)
	x.Detector.remember(&ev, BinaryInfo{Runtime: "busybox", Libc: LibcGlibc})
	var ex Explanation
	buf := make([]byte, 0, 16384)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(&r, &ev)
		x.Explain(&ev, &ex)
		buf = x.appendJSONExplained(buf[:0], &ev, "node-a", &ex, wordings)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEventJSONExplainShort(b *testing.B) { benchEvent(b, false) }
func BenchmarkEventJSONExplainFull(b *testing.B)  { benchEvent(b, true) }
