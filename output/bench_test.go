package output

import (
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// User-space cost per event: the JSON record, alone and with the short
// explanation (decode and explain included). `make bench` runs these.
func benchEvent(b *testing.B, explained bool) {
	var ev decode.Event
	decodeRecorded(b, "../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin", &ev)
	var w Events
	var ex explain.Explanation
	if explained {
		x, err := explain.NewExplainer()
		if err != nil {
			b.Fatal(err)
		}
		w.Explainer = x
	}
	buf := make([]byte, 0, 16384)
	b.ReportAllocs()
	for b.Loop() {
		if explained {
			w.Explainer.Explain(&ev, &ex)
			buf = w.Append(buf[:0], &ev, "node-a", &ex, false, nil)
		} else {
			buf = w.Append(buf[:0], &ev, "node-a", nil, false, nil)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEventJSON(b *testing.B)             { benchEvent(b, false) }
func BenchmarkEventJSONExplainShort(b *testing.B) { benchEvent(b, true) }
