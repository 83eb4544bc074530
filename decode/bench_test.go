package decode

import (
	"os"
	"testing"

	"github.com/eaddr/eaddr/tracer"
)

// User-space cost per event: decode and JSON. `make bench` runs this; the
// explain package has the same with an explanation.
func BenchmarkEventJSON(b *testing.B) {
	raw, err := os.ReadFile("../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin")
	if err != nil {
		b.Fatal(err)
	}
	var r tracer.RawEvent
	if err := r.UnmarshalBinary(raw); err != nil {
		b.Fatal(err)
	}
	d := fixedDecoder()
	var ev Event
	buf := make([]byte, 0, 16384)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(&r, &ev)
		buf = appendJSON(buf[:0], &ev, "node-a")
	}
	b.SetBytes(int64(len(buf)))
}
