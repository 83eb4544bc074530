package top

import (
	"fmt"
	"strings"
	"time"
)

// BarWidth is the cells of the usage bar between its brackets.
const BarWidth = 20

// Header is what the table's first lines say: when, how often, the order,
// paused or not, and where failures/s come from or why they are not there.
type Header struct {
	Interval time.Duration
	// Paced: the view samples again after Pace(Interval, the last
	// sample's Took), and the header says so when that is longer.
	Paced  bool
	Paused bool
	Keys   bool // interactive: name the keys
}

// every is the header's "every ...": the wait before the next sample, and
// why when Pace stretched it.
func (h Header) every(took time.Duration) string {
	if !h.Paced || Pace(h.Interval, took) == h.Interval {
		return "every " + h.Interval.String()
	}
	return fmt.Sprintf("every %s (not %s: a sample took %s, and top samples at most 1/%d of the time)",
		Pace(h.Interval, took).Round(time.Millisecond), h.Interval, took.Round(time.Millisecond), MaxShare)
}

// header lines for s.
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
	if h.Keys {
		lines = append(lines, "keys: q quit  s or > next sort  < previous sort  p or space pause")
	}
	return lines
}

var columns = []string{"NETNS", "DESTINATION", "USED/USABLE", "", "TREND/MIN", "ETA", "FAIL/S"}

// Table renders the header and the rows, one line each, no escape codes.
func (m *Model) Table(h Header) []string {
	lines := m.header(h)
	cells := [][]string{columns}
	for _, r := range m.Rows() {
		cells = append(cells, cellsOf(&r))
	}
	return append(append(lines, ""), align(cells)...)
}

// cellsOf is r's cells; an error row says the error after its name.
func cellsOf(r *Row) []string {
	if r.Error != "" {
		return []string{r.Name, "not audited: " + r.Error}
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

// align pads each column to its widest cell; the last cell of a row is
// not padded.
func align(rows [][]string) []string {
	var w []int
	for _, r := range rows {
		for i, c := range r {
			if i < len(r)-1 {
				for len(w) <= i {
					w = append(w, 0)
				}
				w[i] = max(w[i], len([]rune(c)))
			}
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", w[i]-len([]rune(c))+2))
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}
