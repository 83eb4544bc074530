package top

import (
	"fmt"
	"strings"
	"time"

	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/ports"
)

// BarWidth is the cells of the usage bar between its brackets.
const BarWidth = 10

// Header is what the table's first lines say: when, how often, the order,
// paused or not, and where failures/s come from or why they are not there;
// and how the table is laid out.
type Header struct {
	Interval time.Duration
	// Paced: the view samples again after Pace(Interval, the last
	// sample's Took), and the header says so when that is longer.
	Paced  bool
	Paused bool
	Keys   bool // interactive: name the keys
	// Width is the columns of a line (0: output.DefaultWidth): the NETNS column
	// gives way, and longer text goes on on the next line.
	Width int
	// FirstDetails: the holders and fix under the first row that has
	// them only (the interactive view, where the rows come first); else
	// under each warned row.
	FirstDetails bool
}

func (h Header) width() int {
	if h.Width > 0 {
		return h.Width
	}
	return output.DefaultWidth
}

// every is the header's "every ...": the wait before the next sample, and
// why when the pacing (ports.Pace) stretched it.
func (h Header) every(took time.Duration) string {
	if !h.Paced || ports.Pace(h.Interval, took, ports.TopShare) == h.Interval {
		return "every " + h.Interval.String()
	}
	return fmt.Sprintf("every %s (not %s: a sample took %s, and top samples at most 1/%d of the time)",
		ports.Pace(h.Interval, took, ports.TopShare).Round(time.Millisecond), h.Interval, took.Round(time.Millisecond), ports.TopShare)
}

// legend says what TAKEN counts (docs/top.md has every column).
const legend = "TAKEN: ports a connect() toward DESTINATION cannot have now: held toward it, or for every destination"

// header lines for s, at most h's width each.
func (m *Model) header(h Header) []string {
	s := m.last
	line := fmt.Sprintf("eaddr top  %s  %s  %d netns  sorted by %s", s.At.UTC().Format("15:04:05"), h.every(s.Took), len(s.NetNS), m.Sort.Title())
	if h.Paused {
		line += "  PAUSED"
	}
	lines := []string{line}
	if s.Failures == nil {
		lines = append(lines, "failures/s: - (not counted: "+s.FailuresWhy+")")
	} else {
		lines = append(lines, "failures/s: EADDRNOTAVAIL and EADDRINUSE from connect() and bind(), traced")
	}
	lines = append(lines, m.nodeHeader()...)
	if h.Keys {
		lines = append(lines, "keys: q quit  s or > next sort  < previous sort  p or space pause")
	}
	var out []string
	for _, l := range append(lines, legend) {
		out = append(out, output.Hanging("", l, h.width())...)
	}
	return out
}

// columns is the table's header row (docs/top.md): TAKEN is what TAKEN%
// shows of the ports the kernel tries, PORTS/MIN its trend, FULL-IN the
// time until none is left at that trend.
var columns = []string{"NETNS", "DESTINATION", "TAKEN/USABLE", "TAKEN%", "PORTS/MIN", "FULL-IN", "FAIL/S"}

// Table renders the header and the rows, no escape codes, each line at
// most h's width and every workload's text made safe: the node's SNAT and
// conntrack when at a notable share (node.go), then a row per netns,
// under a row at the warning mark its holders and fix, under one that
// could not be audited its error.
func (m *Model) Table(h Header) []string {
	width := h.width()
	rows := m.Rows()
	cells := [][]string{columns}
	for i := range rows {
		cells = append(cells, cellsOf(&rows[i]))
	}
	table := output.Columns(cells, width, 0, 16)
	lines := append(m.header(h), "")
	if node := m.nodeLines(h); len(node) > 0 {
		lines = append(append(lines, node...), "")
	}
	lines = append(lines, table[0])
	shown := false
	for i := range rows {
		r := &rows[i]
		lines = append(lines, table[i+1])
		switch {
		case r.Error != "":
			lines = append(lines, output.Hanging("  ", r.Error, width)...)
		case r.Culprit.Looked() && !(h.FirstDetails && shown):
			lines = append(lines, output.CulpritLines(&r.Culprit, "  ", width)...)
			shown = true
		}
	}
	return lines
}

// cellsOf is r's cells (raw: Columns makes them safe); an error row says
// it was not audited, and its error goes on the next line.
func cellsOf(r *Row) []string {
	if r.Error != "" {
		return []string{r.Name, "not audited:"}
	}
	dst := r.Destination
	if dst == "" {
		dst = "- (held for all)"
	}
	return []string{r.Name, dst, fmt.Sprintf("%d/%d", r.Used, r.Usable), bar(r.Percent, r.Exhausted),
		trendCell(r.Trend), etaCell(r.ETA), rateCell(r.Failures)}
}

// bar is percent of BarWidth cells, full when exhausted.
func bar(percent int, exhausted bool) string {
	n := min(max(percent, 0)*BarWidth/100, BarWidth)
	if exhausted {
		n = BarWidth
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", BarWidth-n) + "] " + fmt.Sprintf("%3d%%", percent)
}

func trendCell(t Trend) string {
	if !t.OK {
		return "-"
	}
	return fmt.Sprintf("%+.1f", t.PerMin)
}

func etaCell(e ETA) string {
	switch {
	case !e.OK:
		return "-"
	case e.In == 0:
		return "now"
	}
	return Duration(e.In)
}

func rateCell(r Rate) string {
	if !r.OK {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.PerSec)
}

// Duration is d rounded for a person: 45s, 12m, 3h20m, 5d.
func Duration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
