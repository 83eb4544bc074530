package top

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// report is a netns whose busiest destination dst holds ports of tried.
func report(inode uint64, dst string, ports, tried int) diagnose.NetNSReport {
	return diagnose.NetNSReport{Inode: inode, PID: int(inode), Comm: "sleep", Usable: tried, InUse: ports,
		Destinations: []diagnose.Destination{{Remote: dst, Ports: ports, Percent: ports * 100 / tried, Tried: tried, Exhausted: ports == tried}}}
}

// fill adds samples one minute apart, the netns holding ports[i] at the i-th.
func fill(m *Model, inode uint64, dst string, tried int, ports ...int) {
	for i, p := range ports {
		m.Add(Sample{At: t0.Add(time.Duration(i) * time.Minute), NetNS: []diagnose.NetNSReport{report(inode, dst, p, tried)}})
	}
}

func only(t *testing.T, m *Model) Row {
	t.Helper()
	rows := m.Rows()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	return rows[0]
}

func TestTrendAndETA(t *testing.T) {
	m := NewModel()
	fill(m, 1, "10.0.0.1:80", 1000, 100)
	r := only(t, m)
	if r.Trend.OK || r.ETA.OK || !strings.Contains(r.Trend.Why, "1 sample") {
		t.Errorf("one sample: trend %+v eta %+v, want neither, with why", r.Trend, r.ETA)
	}
	m = NewModel()
	fill(m, 1, "10.0.0.1:80", 1000, 100, 110, 120, 130)
	r = only(t, m)
	if !r.Trend.OK || r.Trend.PerMin != 10 || r.Trend.Samples != 4 {
		t.Errorf("trend %+v, want +10/min over 4 samples", r.Trend)
	}
	if r.Left != 870 || !r.ETA.OK || r.ETA.In != 87*time.Minute {
		t.Errorf("left %d eta %+v, want 870 left in 87m", r.Left, r.ETA)
	}
	// least squares, not the last two: 100 130 120 150 rises 14/min
	m = NewModel()
	fill(m, 1, "10.0.0.1:80", 1000, 100, 130, 120, 150)
	if r = only(t, m); r.Trend.PerMin != 14 {
		t.Errorf("trend %v, want the least-squares 14/min", r.Trend.PerMin)
	}
}

func TestNoETAUnlessRising(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports []int
		want  string
	}{{"flat", []int{500, 500, 500}, "does not rise"}, {"falling", []int{500, 400, 300}, "does not rise"}} {
		m := NewModel()
		fill(m, 1, "10.0.0.1:80", 1000, tc.ports...)
		r := only(t, m)
		if !r.Trend.OK || r.ETA.OK || !strings.Contains(r.ETA.Why, tc.want) {
			t.Errorf("%s: trend %+v eta %+v, want a trend and no eta", tc.name, r.Trend, r.ETA)
		}
	}
	m := NewModel()
	fill(m, 1, "10.0.0.1:80", 1000, 990, 1000)
	if r := only(t, m); !r.ETA.OK || r.ETA.In != 0 || etaCell(r.ETA) != "now" {
		t.Errorf("exhausted: eta %+v, want now", r.ETA)
	}
}

// A destination that was not among an earlier sample's top ones has no
// count there: its trend starts when it appears.
func TestTrendStartsWithTheDestination(t *testing.T) {
	m := NewModel()
	first := report(1, "10.0.0.1:80", 100, 1000) // 10.0.0.2:80 second, with 50
	first.Destinations = append(first.Destinations, diagnose.Destination{Remote: "10.0.0.2:80", Ports: 50, Tried: 1000})
	m.Add(Sample{At: t0, NetNS: []diagnose.NetNSReport{first}})
	m.Add(Sample{At: t0.Add(time.Minute), NetNS: []diagnose.NetNSReport{report(1, "10.0.0.1:80", 200, 1000)}}) // 10.0.0.2:80 not in the top
	m.Add(Sample{At: t0.Add(2 * time.Minute), NetNS: []diagnose.NetNSReport{report(1, "10.0.0.2:80", 300, 1000)}})
	if r := only(t, m); r.Trend.OK || r.Destination != "10.0.0.2:80" {
		t.Errorf("new busiest destination: trend %+v, want none yet", r.Trend)
	}
	m.Add(Sample{At: t0.Add(3 * time.Minute), NetNS: []diagnose.NetNSReport{report(1, "10.0.0.2:80", 310, 1000)}})
	if r := only(t, m); !r.Trend.OK || r.Trend.PerMin != 10 {
		t.Errorf("trend %+v, want +10/min from its own two samples", r.Trend)
	}
}

func TestFailureRate(t *testing.T) {
	m := NewModel()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 2 * time.Second) }
	rep := []diagnose.NetNSReport{report(1, "10.0.0.1:80", 10, 100)}
	m.Add(Sample{At: at(1), NetNS: rep, Failures: map[uint64]uint64{1: 4}, FailuresSince: at(0)})
	if r := only(t, m); !r.Failures.OK || r.Failures.PerSec != 2 {
		t.Errorf("first sample: %+v, want 4 in the 2 s since the tracer started", r.Failures)
	}
	m.Add(Sample{At: at(2), NetNS: rep, Failures: map[uint64]uint64{1: 24}, FailuresSince: at(0)})
	if r := only(t, m); !r.Failures.OK || r.Failures.PerSec != 10 || r.Failures.Count != 20 {
		t.Errorf("second sample: %+v, want 20 in 2 s", r.Failures)
	}
	m.Add(Sample{At: at(3), NetNS: rep, FailuresWhy: "the tracer could not be attached: nope"})
	if r := only(t, m); r.Failures.OK || rateCell(r.Failures) != "-" {
		t.Errorf("not counted: %+v, want -", r.Failures)
	}
	if h := m.header(Header{}); !strings.Contains(strings.Join(h, "\n"), "not counted: the tracer could not be attached: nope") {
		t.Errorf("header %q does not say why failures are not counted", h)
	}
}

func TestSortByETA(t *testing.T) {
	m := NewModel()
	for i := range 3 {
		m.Add(Sample{At: t0.Add(time.Duration(i) * time.Minute), NetNS: []diagnose.NetNSReport{
			report(1, "10.0.0.1:80", 900, 1000),      // flat at 90%: no eta
			report(2, "10.0.0.2:80", 100+i*10, 1000), // 10/min, 880 left: 88m
			report(3, "10.0.0.3:80", 100+i*100, 1000),
			{Inode: 4, Error: "cannot enter"},
			report(5, "10.0.0.5:80", 500+i*10, 1000), // 10/min, 480 left: 48m
		}})
	}
	var got []uint64
	for _, r := range m.Rows() {
		got = append(got, r.Inode)
	}
	if want := []uint64{3, 5, 2, 1, 4}; !equal(got, want) {
		t.Errorf("sorted by eta: %v, want %v", got, want)
	}
	m.Sort = SortUsed
	got = got[:0]
	for _, r := range m.Rows() {
		got = append(got, r.Inode)
	}
	if want := []uint64{1, 5, 3, 2, 4}; !equal(got, want) {
		t.Errorf("sorted by used: %v, want %v", got, want)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSortKeysCycle(t *testing.T) {
	k := SortETA
	seen := map[SortKey]bool{}
	for range sortKeys {
		seen[k] = true
		if k.Next(1).Next(-1) != k {
			t.Errorf("%v: next then previous is %v", k, k.Next(1).Next(-1))
		}
		k = k.Next(1)
	}
	if k != SortETA || len(seen) != int(sortKeys) {
		t.Errorf("s cycles through %d keys and ends on %v", len(seen), k)
	}
	if SortETA.Next(-1) != SortName {
		t.Errorf("< from eta is %v, want name", SortETA.Next(-1))
	}
}

func TestTable(t *testing.T) {
	m := NewModel()
	fill(m, 7, "10.0.0.1:80", 1000, 100, 110)
	s := m.Last()
	s.NetNS = append(s.NetNS, diagnose.NetNSReport{Inode: 8, Error: "no live process left in the network namespace"})
	s.Failures, s.FailuresSince = map[uint64]uint64{}, s.At.Add(-time.Second)
	m.Add(s)
	lines := m.Table(Header{Interval: 2 * time.Second})
	text := strings.Join(lines, "\n")
	if strings.Contains(text, "\x1b") {
		t.Errorf("escape codes in the table:\n%s", text)
	}
	head, row, errRow := lineWith(lines, "NETNS "), lineWith(lines, "netns:7"), lineWith(lines, "netns:8")
	for _, col := range []string{"DESTINATION", "TAKEN/USABLE", "TAKEN%", "PORTS/MIN", "FULL-IN", "FAIL/S"} {
		if !strings.Contains(head, col) {
			t.Errorf("header row %q lacks %q", head, col)
		}
	}
	if !strings.Contains(text, legend) {
		t.Errorf("the header does not say what TAKEN counts:\n%s", text)
	}
	for _, cell := range []string{"netns:7 (sleep)", "10.0.0.1:80", "110/1000", "[#.........]  11%", "+10.0", "1h29m", "0.0"} {
		if !strings.Contains(row, cell) {
			t.Errorf("row %q lacks %q", row, cell)
		}
	}
	if !strings.Contains(errRow, "not audited") || strings.Contains(errRow, "0/0") || !strings.Contains(text, errRow+"\n  no live process left") {
		t.Errorf("error row %q, want not audited, no numbers, and the error under it:\n%s", errRow, text)
	}
}

// lineWith is the first line that starts with prefix.
func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// hostileComm writes the operator's clipboard (OSC 52) if it reaches a
// terminal as it is.
const hostileComm = "\x1b]52;c;aGk=\x07"

// warned is a sample of two netns at 100% and 80% toward their busiest
// destination, each with its culprit, held by a process with a hostile
// name in a netns mounted under a hostile name.
func warned() Sample {
	full := report(1, "127.0.0.1:8080", 10, 10)
	full.Comm = hostileComm
	full.Destinations[0].Culprit = diagnose.Culprit{Cause: diagnose.CausePerDestination,
		Holders: []diagnose.CulpritHolder{{PID: 4242, Comm: hostileComm, Sockets: 10, PodUID: "0f3c"}},
		Fix: []string{"pid 4242 (" + hostileComm + ") holds 10 connections to this destination: reuse connections (HTTP keep-alive, a connection pool) instead of opening new ones",
			`net.ipv4.ip_local_port_range="1024 65535" in this netns gives 64512 ports`}}
	eighty := report(2, "10.0.0.2:443", 8, 10)
	eighty.Mount = "/run/netns/" + hostileComm
	eighty.Destinations[0].Culprit = diagnose.Culprit{Cause: diagnose.CauseTimeWait, NoHolder: "no process holds them: the kernel keeps closed connections until they time out",
		Fix: []string{"net.ipv4.tcp_tw_reuse=1 in this netns (now 0) lets connect() reuse a TIME_WAIT port"}}
	return Sample{At: t0, NetNS: []diagnose.NetNSReport{full, eighty}, FailuresWhy: "--trace=false"}
}

// A warned row names its holders (pid, comm, pod) and fix under it, made
// safe and wrapped to the width; the interactive view only under the first
// such row, so that the rows come first.
func TestTableCulprit(t *testing.T) {
	m := NewModel()
	m.Add(warned())
	for _, width := range []int{120, 100, 80, 60} {
		lines := m.Table(Header{Width: width})
		text := strings.Join(lines, "\n")
		for _, l := range lines {
			if len([]rune(l)) > width {
				t.Errorf("at %d columns, a line of %d: %q", width, len([]rune(l)), l)
			}
		}
		if width < 100 {
			continue // the columns are cut: the lines' widths are what counts
		}
		for _, want := range []string{`netns:1 (\x1b]52;c;`, `netns \x1b]52;c;`,
			`  held by: pid 4242 (\x1b]52;c;aGk=\x07) in pod uid 0f3c with 10 sockets`, `  fix: pid 4242 (\x1b]52;c;aGk=\x07) holds 10 connections`,
			`"1024 65535"`, "  held by: no process holds them", "  fix: net.ipv4.tcp_tw_reuse=1"} {
			if !strings.Contains(text, want) {
				t.Errorf("at %d columns, no %q in\n%s", width, want, text)
			}
		}
		if strings.ContainsAny(text, "\x1b\x07") {
			t.Errorf("an escape reached the table:\n%s", text)
		}
	}
	first := strings.Join(m.Table(Header{Width: 120, FirstDetails: true}), "\n")
	if strings.Count(first, "held by:") != 1 || !strings.Contains(first, "held by: pid 4242") {
		t.Errorf("interactive: want the first warned row's holders only:\n%s", first)
	}
	t.Logf("at 120 columns:\n%s", strings.Join(m.Table(Header{Width: 120}), "\n"))
}

func TestJSONLeavesOutWhatIsNotKnown(t *testing.T) {
	m := NewModel()
	fill(m, 7, "10.0.0.1:80", 1000, 100)
	m.Add(Sample{At: t0, NetNS: []diagnose.NetNSReport{report(7, "10.0.0.1:80", 100, 1000), {Inode: 8, Error: "gone"}}, FailuresWhy: "--trace=false"})
	b, err := m.JSON(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	rows := got["netns"].([]any)
	r0, r1 := rows[0].(map[string]any), rows[1].(map[string]any)
	if r0["used"] != 100.0 || r0["trend_ports_per_min"] != nil || r0["trend_unknown"] == nil || r0["failures_per_second"] != nil ||
		r0["failures_unknown"] != "--trace=false" || got["failures_unknown"] != "--trace=false" {
		t.Errorf("first row %v", r0)
	}
	if r1["error"] != "gone" || r1["used"] != nil || r1["usable"] != nil {
		t.Errorf("unaudited row %v, want the error and no numbers", r1)
	}
}

// A warned row's JSON has its cause, holders and fix beside its counts,
// the names as they are (JSON escapes them); a row below the mark none.
func TestJSONCulprit(t *testing.T) {
	m := NewModel()
	smp := warned()
	smp.NetNS = append(smp.NetNS, report(3, "10.0.0.3:80", 1, 10))
	m.Add(smp)
	snap, b := snapshotOf(t, m)
	r := snap.NetNS[0]
	if r.Cause != diagnose.CausePerDestination || len(r.Holders) != 1 || r.Holders[0].PID != 4242 || r.Holders[0].Comm != hostileComm ||
		r.Holders[0].PodUID != "0f3c" || len(r.Fix) != 2 || snap.NetNS[1].Mount != "/run/netns/"+hostileComm || snap.NetNS[1].NoHolder == "" {
		t.Errorf("rows %+v", snap.NetNS)
	}
	if !strings.Contains(string(b), `"holders":[{"pid":4242,"comm":"\u001b]52;c;aGk=\u0007","sockets":10,"pod_uid":"0f3c"}]`) ||
		strings.Count(string(b), `"cause"`) != 2 || strings.ContainsAny(string(b), "\x1b\x07") {
		t.Errorf("JSON %s", b)
	}
}

// Once with an interval takes two samples, so the snapshot has a trend.
func TestOnceTakesTwoSamples(t *testing.T) {
	n := 0
	s := &Sampler{
		Audit: func() ([]diagnose.NetNSReport, error) {
			n++
			return []diagnose.NetNSReport{report(1, "10.0.0.1:80", 100*n, 1000)}, nil
		},
		Now:           func() time.Time { return t0.Add(time.Duration(n) * time.Minute) },
		NoFailuresWhy: "test",
	}
	var out strings.Builder
	if err := Once(context.Background(), s, NewModel(), time.Millisecond, true, 0, &out); err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	if err := json.Unmarshal([]byte(out.String()), &snap); err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(snap.NetNS) != 1 || snap.NetNS[0].TrendPerMin == nil || *snap.NetNS[0].TrendPerMin != 100 ||
		snap.NetNS[0].SecondsToExhaustion == nil || *snap.NetNS[0].SecondsToExhaustion != 480 {
		t.Errorf("%d samples, snapshot %s; want 2, +100/min and 8 minutes left", n, out.String())
	}
}

// Ports the model is unsure of are not free for sure, nor taken: no time.
func TestNoETAWhenOnlyUnsurePortsAreLeft(t *testing.T) {
	m := NewModel()
	for i, p := range []int{980, 990} {
		r := report(1, "10.0.0.1:80", p, 1000)
		r.Destinations[0].Unsure = 1000 - p
		m.Add(Sample{At: t0.Add(time.Duration(i) * time.Minute), NetNS: []diagnose.NetNSReport{r}})
	}
	if r := only(t, m); r.ETA.OK || !strings.Contains(r.ETA.Why, "not exhausted") {
		t.Errorf("eta %+v, want none: the unsure ports may be free", r.ETA)
	}
}
