package output

import (
	"strings"
	"unsafe"

	"github.com/eaddr/eaddr/internal/termtext"
)

// DefaultWidth is the width a human form keeps to when it does not know the
// terminal's (stdout is a pipe or a file).
const DefaultWidth = 120

// minWidth is the narrowest a human form wraps to: below it, the labels and
// indents leave no room for words.
const minWidth = 60

// appendWrapped appends s as prose for a person: its words made safe for a
// terminal (termtext), lines at most width columns, each line after the
// first starting at column indent. The caller has written col columns of
// the current line. A word longer than a line is cut where the line ends.
// It does not allocate.
func appendWrapped(b []byte, s string, col, indent, width int) []byte {
	width = max(width, indent+20)
	first := true
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return b
		}
		end := wordEnd(s)
		word := s[:end]
		s = s[end:]
		w := termtext.Width(word)
		sep := 1
		if first {
			sep = 0
		}
		first = false
		if col+sep+w > width && col > indent {
			b = newline(b, indent)
			col, sep = indent, 0
		}
		if sep == 1 {
			b = append(b, ' ')
			col++
		}
		for col+w > width {
			head, rest := termtext.Cut(word, width-col)
			b = termtext.Append(b, head)
			b = newline(b, indent)
			col = indent
			word, w = rest, termtext.Width(rest)
		}
		b = termtext.Append(b, word)
		col += w
	}
}

// wordEnd is where the word that starts s ends: at a space outside double
// quotes, so that a quoted value of a command ("1024 65535") is never split
// over two lines, or at the end of s.
func wordEnd(s string) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ' ':
			if !quoted {
				return i
			}
		}
	}
	return len(s)
}

// newline ends a line and indents the next one.
func newline(b []byte, indent int) []byte {
	b = append(b, '\n')
	for range indent {
		b = append(b, ' ')
	}
	return b
}

// padTo fills with spaces up to column col of the line that began at start
// (bytes, which is columns for the ASCII written so far), leaving at least
// one space.
func padTo(b []byte, start, col int) []byte {
	b = append(b, ' ')
	for len(b)-start < col {
		b = append(b, ' ')
	}
	return b
}

// view is b as a string without a copy, for text built in a buffer on the
// stack and written at once: the string must not outlive b, and b must not
// change while it is used. It keeps the per-event path free of allocations.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
