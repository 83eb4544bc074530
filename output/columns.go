package output

import (
	"strings"

	"github.com/eaddr/eaddr/internal/termtext"
)

// Columns lays rows of cells out as aligned columns two spaces apart, for
// check's and top's tables: each cell made safe (termtext), each line at
// most width columns. Column shrink (the netns's name) takes what the
// others leave, down to minShrink, cut with an ellipsis; a line that is
// still too wide (a terminal narrower than the fixed columns) is cut. The
// last cell of a row is not padded.
func Columns(rows [][]string, width, shrink, minShrink int) []string {
	w := columnWidths(rows)
	if over := widest(rows, w) - width; over > 0 && shrink < len(w) {
		w[shrink] = max(w[shrink]-over, min(minShrink, w[shrink]))
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, columnsLine(r, w, width))
	}
	return out
}

// columnWidths is each column's widest cell, the last cell of each row
// left out (it is not padded).
func columnWidths(rows [][]string) []int {
	var w []int
	for _, r := range rows {
		for i, c := range r[:max(len(r)-1, 0)] {
			for len(w) <= i {
				w = append(w, 0)
			}
			w[i] = max(w[i], termtext.Width(c))
		}
	}
	return w
}

// widest is the widest row laid out in columns w, its last cell in full.
func widest(rows [][]string, w []int) int {
	most := 0
	for _, r := range rows {
		n := 0
		for i, c := range r {
			if i < len(r)-1 {
				n += w[i] + 2
			} else {
				n += termtext.Width(c)
			}
		}
		most = max(most, n)
	}
	return most
}

// columnsLine is one row: each cell fitted to its column, padded, and the
// line cut at width.
func columnsLine(r []string, w []int, width int) string {
	var b []byte
	used := 0
	for i, c := range r {
		cw := termtext.Width(c)
		if i < len(r)-1 && cw > w[i] {
			cw = w[i]
		}
		if used+cw > width {
			b = termtext.AppendFit(b, c, width-used)
			break
		}
		b = termtext.AppendFit(b, c, cw)
		used += cw
		if i == len(r)-1 {
			break
		}
		pad := w[i] - cw + 2
		if used+pad >= width {
			break
		}
		b = append(b, strings.Repeat(" ", pad)...)
		used += pad
	}
	return strings.TrimRight(string(b), " ")
}
