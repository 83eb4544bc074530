package otelcol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
)

// CollectorAttributes are the attributes of a record that the collector
// adds beside eaddr's fields: the stream (container parser) and the file
// read (include_file_path).
var CollectorAttributes = []string{"log.iostream", "log.file.path"}

// Severities are the severity numbers of ConfigPath's mapping from kind.
var Severities = map[string]int{"failure": 13, "nodeport_collision": 13, "summary": 9} // WARN, INFO

// CheckWait bounds how long Check waits for the collector to hand on
// every expected line.
const CheckWait = 60 * time.Second

// Check runs the collector with ConfigPath on the CRI logs matching include
// (a pod log glob such as /var/log/pods/*_eaddr-*_*/eaddr/*.log), waits
// until it has handed on a record for each of want (the JSON lines eaddr
// wrote on stdout, as found in the log), and checks each: its attributes
// are the line's fields, field for field and typed as in the line (numbers
// as int64 or float64 as written, objects as maps, arrays as arrays) plus
// CollectorAttributes only; its timestamp is the line's time; its severity
// follows its kind; and its resource names the namespace, pod, pod UID,
// container and restart count of the path it was read from. It returns
// every record handed on, for further checks.
func Check(t testing.TB, include string, want []string) []Record {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("otelcol.Check: no lines to look for")
	}
	c := Run(t, include)
	recs, missing := waitDelivered(t, c, want)
	if err := c.Stop(); err != nil {
		t.Errorf("%v\n%s", err, buildcache.Tail(c.Log, 30))
	}
	if len(missing) > 0 {
		t.Fatalf("after %v the collector had handed on %d records, none with the body of these %d of the %d lines eaddr wrote:\n%s\ncollector log:\n%s",
			CheckWait, len(recs), len(missing), len(want), strings.Join(missing, "\n"), buildcache.Tail(c.Log, 30))
	}
	byBody := map[string][]Record{}
	for _, r := range recs {
		if s, ok := r.Body.(string); ok {
			byBody[s] = append(byBody[s], r)
		}
	}
	for i, line := range want {
		r := byBody[line][0]
		byBody[line] = byBody[line][1:]
		for _, d := range RecordDiff(line, r) {
			t.Errorf("line %d: %s", i+1, d)
		}
	}
	// Lines eaddr wrote after the caller read its log: checked against the
	// line the collector read.
	extra := 0
	for body, rs := range byBody {
		for _, r := range rs {
			if r.Attributes["log.iostream"] == "stdout" {
				extra++
				for _, d := range RecordDiff(body, r) {
					t.Errorf("a later line: %s\n%s", d, body)
				}
			}
		}
	}
	t.Logf("otelcol: %d records handed on; each of the %d lines eaddr wrote (and %d later ones) with every field typed", len(recs), len(want), extra)
	return recs
}

// waitDelivered waits up to CheckWait for the collector's output to hold a
// record whose body is each of want (a multiset: a line written twice
// needs two records). It returns the records and the lines still missing.
func waitDelivered(t testing.TB, c *Collector, want []string) (recs []Record, missing []string) {
	t.Helper()
	deadline := time.Now().Add(CheckWait)
	for {
		var err error
		recs, err = ReadOTLP(c.Output)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("reading the collector's output: %v", err)
		}
		missing = missingBodies(recs, want)
		if len(missing) == 0 || c.Exited() || time.Now().After(deadline) {
			return recs, missing
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func missingBodies(recs []Record, want []string) []string {
	have := map[string]int{}
	for _, r := range recs {
		if s, ok := r.Body.(string); ok {
			have[s]++
		}
	}
	var missing []string
	for _, line := range want {
		if have[line] == 0 {
			missing = append(missing, line)
			continue
		}
		have[line]--
	}
	return missing
}

// RecordDiff lists how record r differs from what the collector should have
// made of line, one of eaddr's JSON lines: see Check. Nil when it does not.
func RecordDiff(line string, r Record) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var want map[string]any
	if err := dec.Decode(&want); err != nil {
		return []string{fmt.Sprintf("not a JSON object: %v: %s", err, line)}
	}
	var diffs []string
	got := maps.Clone(r.Attributes)
	if got == nil {
		got = map[string]any{}
	}
	if s := got["log.iostream"]; s != "stdout" {
		diffs = append(diffs, fmt.Sprintf("attribute log.iostream %#v, want \"stdout\"", s))
	}
	path, _ := got["log.file.path"].(string)
	for _, k := range CollectorAttributes {
		delete(got, k)
	}
	diffs = append(diffs, Diff("attributes", want, got)...)
	if ts, ok := want["time"].(string); ok {
		if w, err := time.Parse(time.RFC3339Nano, ts); err != nil || !r.Time.Equal(w) {
			diffs = append(diffs, fmt.Sprintf("timestamp %s, want the line's time %s", r.Time.Format(time.RFC3339Nano), ts))
		}
	}
	if kind, _ := want["kind"].(string); r.SeverityNumber != Severities[kind] {
		diffs = append(diffs, fmt.Sprintf("severity %d (%q), want %d for kind %q", r.SeverityNumber, r.SeverityText, Severities[kind], kind))
	}
	return append(diffs, resourceDiff(path, r.Resource)...)
}

// podLogPath matches <dir>/<namespace>_<pod>_<uid>/<container>/<n>.log.
var podLogPath = regexp.MustCompile(`/([^/_]+)_([^/_]+)_([^/_]+)/([^/]+)/([0-9]+)\.log$`)

// resourceDiff checks that the resource carries the pod metadata the log
// file's path says, and nothing else.
func resourceDiff(path string, res map[string]any) []string {
	m := podLogPath.FindStringSubmatch(path)
	if m == nil {
		return []string{fmt.Sprintf("attribute log.file.path %q is not a pod log path <namespace>_<pod>_<uid>/<container>/<n>.log", path)}
	}
	want := map[string]any{
		"k8s.namespace.name":          m[1],
		"k8s.pod.name":                m[2],
		"k8s.pod.uid":                 m[3],
		"k8s.container.name":          m[4],
		"k8s.container.restart_count": m[5],
	}
	return Diff("resource ("+filepath.Base(filepath.Dir(filepath.Dir(path)))+")", want, res)
}

// Diff walks want, a value decoded by encoding/json with UseNumber (or
// built of strings, bools, json.Number, []any and map[string]any), beside
// got, a Record's value, and lists every difference of value or of type
// under the path where. A JSON number written without fraction or exponent
// must be an int64, any other a float64; an object a map with the same
// keys; an array an array of the same length.
func Diff(where string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, want an object (map)", where, describe(got))}
		}
		var diffs []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing, want %s", where, k, describe(w[k])))
				continue
			}
			diffs = append(diffs, Diff(where+"."+k, w[k], g[k])...)
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: %s, not in the line", where, k, describe(g[k])))
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %s, want an array of %d", where, describe(got), len(w))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, Diff(fmt.Sprintf("%s[%d]", where, i), w[i], g[i])...)
		}
		return diffs
	case json.Number:
		return numberDiff(where, w, got)
	case string, bool:
		if got != want {
			return []string{fmt.Sprintf("%s: %s, want %s", where, describe(got), describe(want))}
		}
		return nil
	}
	return []string{fmt.Sprintf("%s: cannot compare a %T in the line", where, want)}
}

// numberDiff compares a JSON number with an int64 (integers) or a float64.
func numberDiff(where string, w json.Number, got any) []string {
	s := w.String()
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if g, ok := got.(int64); err != nil || !ok || g != i {
			return []string{fmt.Sprintf("%s: %s, want int %s", where, describe(got), s)}
		}
		return nil
	}
	f, err := w.Float64()
	if g, ok := got.(float64); err != nil || !ok || g != f {
		return []string{fmt.Sprintf("%s: %s, want double %s", where, describe(got), s)}
	}
	return nil
}

// describe names a value with its type, as Diff reports it.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "empty"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("bool %v", x)
	case int64:
		return fmt.Sprintf("int %d", x)
	case float64:
		return fmt.Sprintf("double %v", x)
	case json.Number:
		return "number " + x.String()
	case map[string]any:
		return fmt.Sprintf("object of %d keys", len(x))
	case []any:
		return fmt.Sprintf("array of %d", len(x))
	}
	return fmt.Sprintf("%T %v", v, v)
}
