package otelcol

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Diff finds a field of another type, a missing or extra field, at any
// depth, and takes a typed copy for equal.
func TestDiff(t *testing.T) {
	line := `{"schema":1,"time":"2026-01-01T00:00:00Z","process":{"pid":20685,"comm":"curl"},"ratio":0.5,"list":[1,"a"],"ok":true}`
	typed := func() map[string]any {
		return map[string]any{"schema": int64(1), "time": "2026-01-01T00:00:00Z",
			"process": map[string]any{"pid": int64(20685), "comm": "curl"}, "ratio": 0.5,
			"list": []any{int64(1), "a"}, "ok": true}
	}
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		want   []string
	}{
		{"typed", func(map[string]any) {}, nil},
		{"double for int", func(m map[string]any) { m["process"].(map[string]any)["pid"] = 20685.0 },
			[]string{"a.process.pid: double 20685, want int 20685"}},
		{"string for int", func(m map[string]any) { m["schema"] = "1" },
			[]string{`a.schema: string "1", want int 1`}},
		{"object as string", func(m map[string]any) { m["process"] = `{"pid":20685,"comm":"curl"}` },
			[]string{`a.process: string "{\"pid\":20685,\"comm\":\"curl\"}", want an object (map)`}},
		{"missing", func(m map[string]any) { delete(m["process"].(map[string]any), "comm") },
			[]string{`a.process.comm: missing, want string "curl"`}},
		{"extra", func(m map[string]any) { m["x"] = "y" }, []string{`a.x: string "y", not in the line`}},
		{"array", func(m map[string]any) { m["list"] = []any{int64(1), "b"} }, []string{`a.list[1]: string "b", want string "a"`}},
		{"bool", func(m map[string]any) { m["ok"] = "true" }, []string{`a.ok: string "true", want bool true`}},
		{"int for double", func(m map[string]any) { m["ratio"] = int64(0) }, []string{"a.ratio: int 0, want double 0.5"}},
	} {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var want map[string]any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		got := typed()
		tc.change(got)
		if d := Diff("a", want, got); !slices.Equal(d, tc.want) {
			t.Errorf("%s: Diff = %q, want %q", tc.name, d, tc.want)
		}
	}
}

// eventLines are the recorded events of testdata/events, one line each.
func eventLines(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(ConfigPath()), "..", "..", "testdata", "events", "*.json"))
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) < 10 {
		t.Fatalf("%d recorded events in testdata/events, want at least 10", len(lines))
	}
	return lines
}

// The collector with deploy/otelcol/eaddr.yaml hands on every recorded
// event of testdata/events typed, from a CRI log file written here in the
// format containerd writes (cmd/eaddr's TestLogAgent has containerd write
// it): a line split into a partial (P) and a full (F) record, as the
// runtime splits a line longer than 16 KiB, arrives whole; a stderr line is
// not parsed. No root needed.
func TestCollectorTypesRecordedEvents(t *testing.T) {
	lines := eventLines(t)
	lines = append(lines, `{"schema":1,"kind":"summary","time":"2026-11-30T06:00:00Z","since":"2026-11-30T05:59:00Z","node":"node-a","events":6000,"errnos":{"EADDRNOTAVAIL":6000},"lost":0,"lost_total":0,"dropped":0,"dropped_total":0,"suppressed":48211,"suppressed_total":48211}`)
	dir := filepath.Join(t.TempDir(), "pods", "eaddr_eaddr-x7k2p_0c4e5a7e-2f6d-4d0e-9d56-1a6a2f3b9c11", "eaddr")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	ts := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	for i, l := range lines {
		stamp := ts.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		if i == 3 {
			fmt.Fprintf(&log, "%s stdout P %s\n", stamp, l[:40])
			l = l[40:]
		}
		fmt.Fprintf(&log, "%s stdout F %s\n", stamp, l)
	}
	fmt.Fprintf(&log, "%s stderr F time=2026-12-04T08:00:01Z level=INFO msg=attached\n", ts.Format(time.RFC3339Nano))
	if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := Check(t, filepath.Join(filepath.Dir(filepath.Dir(dir)), "*_eaddr-*_*", "eaddr", "*.log"), lines)
	if len(recs) != len(lines)+1 {
		t.Errorf("%d records, want %d (the stdout lines and the stderr line)", len(recs), len(lines)+1)
	}
	for _, r := range recs {
		if r.Attributes["log.iostream"] == "stderr" && r.Body != "time=2026-12-04T08:00:01Z level=INFO msg=attached" {
			t.Errorf("stderr record: body %#v, attributes %v", r.Body, r.Attributes)
		}
	}
}
