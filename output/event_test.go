package output

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/recorded"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

var update = flag.Bool("update", false, "rewrite the expected outputs in testdata/events")

// bootZero is the wall time of boot time 0 in the expected outputs, so they
// do not depend on when the test runs.
var bootZero = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// decodeRecorded decodes a recorded raw event with boot time 0 = bootZero.
func decodeRecorded(t testing.TB, path string, ev *decode.Event) {
	t.Helper()
	decode.NewDecoder(nil).Decode(recorded.RawFile(t, path), ev)
	ev.Time = bootZero.Add(time.Duration(ev.BootNs))
}

// plain writes events without explanations.
var plain Events

func appendJSON(b []byte, ev *decode.Event, node string) []byte {
	return plain.Append(b, ev, node, nil, nil)
}

// TestGolden decodes every event recorded from the real kernel (see
// testdata/events/README.md) and compares JSON and table output.
func TestGolden(t *testing.T) {
	bins, _ := filepath.Glob("../testdata/events/*.bin")
	if len(bins) == 0 {
		t.Fatal("no recorded events in testdata/events")
	}
	for _, bin := range bins {
		name := strings.TrimSuffix(filepath.Base(bin), ".bin")
		t.Run(name, func(t *testing.T) {
			var ev decode.Event
			decodeRecorded(t, bin, &ev)
			got := appendJSON(nil, &ev, "node-a")
			got = append(got, '\n')
			testenv.ValidateLine(t, string(got))
			golden := strings.TrimSuffix(bin, ".bin") + ".json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./output -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("JSON differs from %s\n got: %s\nwant: %s", golden, got, want)
			}
		})
	}
}

func TestAppendStringEscapes(t *testing.T) {
	in := "a\"b\\c\x00\x1f\x7f\xc3\xa9\xff"
	got := AppendString(nil, in)
	if !json.Valid(got) {
		t.Fatalf("invalid JSON %s", got)
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if want := "a\"b\\c\x00\x1f\x7fé\ufffd"; back != want {
		t.Errorf("round trip %q, want %q", back, want)
	}
}

// Events.Append writes an event with its explain object and diagnosis as
// valid JSON of the published schema, without allocating once its buffers
// have grown.
func TestEventExplainedDoesNotAllocate(t *testing.T) {
	x, err := explain.NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	var ev decode.Event
	decodeRecorded(t, "../testdata/events/connect-eaddrnotavail-busybox-wget-ipv4.bin", &ev)
	var w Events
	var ex explain.Explanation
	g := &diagnose.Diagnosis{Verdict: "v", RangeLo: 1, RangeHi: 2, Usable: 2, InUse: 2, At: bootZero}
	buf := make([]byte, 0, 16384)
	for _, full := range []bool{false, true} {
		x.Explain(&ev, &ex, full)
		line := w.Append(nil, &ev, "node-a", &ex, g)
		testenv.ValidateLine(t, string(line))
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("invalid JSON %v: %s", err, line)
		}
		if e, ok := m["explain"].(map[string]any); !ok || e["meaning"] == nil || (full && len(e["other_wordings"].([]any)) < 10) {
			t.Errorf("explain object %v (full %v)", m["explain"], full)
		}
		n := testing.AllocsPerRun(200, func() {
			x.Explain(&ev, &ex, full)
			buf = w.Append(buf[:0], &ev, "node-a", &ex, g)
		})
		if n != 0 {
			t.Errorf("explained event (wordings %v) allocates %.1f times, want 0", full, n)
		}
	}
}

func TestEventJSONDoesNotAllocate(t *testing.T) {
	var ev decode.Event
	decodeRecorded(t, "../testdata/events/connect-eaddrnotavail-curl-ipv4.bin", &ev)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(1000, func() { buf = appendJSON(buf[:0], &ev, "node-a") }); n != 0 {
		t.Errorf("event JSON allocates %.1f times per event, want 0", n)
	}
}
