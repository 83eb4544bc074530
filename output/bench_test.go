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
	var explainer *explain.Explainer
	if explained {
		x, err := explain.NewExplainer()
		if err != nil {
			b.Fatal(err)
		}
		explainer = x
	}
	buf := make([]byte, 0, 16384)
	b.ReportAllocs()
	for b.Loop() {
		if explained {
			explainer.Explain(&ev, &ex, false)
			buf = w.Append(buf[:0], &ev, "node-a", &ex, nil)
		} else {
			buf = w.Append(buf[:0], &ev, "node-a", nil, nil)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEventJSON(b *testing.B)             { benchEvent(b, false) }
func BenchmarkEventJSONExplainShort(b *testing.B) { benchEvent(b, true) }
