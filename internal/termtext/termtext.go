// Package termtext makes text that came from a workload safe to print on a
// terminal, and measures it in terminal columns.
//
// Process names, paths, pod names and labels are chosen by whoever runs on
// the node: a comm of "\x1b]52;c;...\x07" writes the operator's clipboard
// (OSC 52), "\x1b[2J" clears the screen, U+202E turns the rest of a line
// around (kubectl fixed this class as CVE-2021-25743). Every human renderer
// of eaddr writes such text through Append, which escapes visibly whatever a
// terminal would act on instead of show:
//
//   - C0 controls and DEL (\x1b, \a, \r, \n, \t ...) as \xNN;
//   - C1 controls (U+0080-U+009F, which an 8-bit terminal reads as CSI, OSC
//     ...) as \u0080-\u009f;
//   - format characters (Unicode category Cf: the bidi overrides and isolates
//     U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F/U+061C,
//     zero-width characters, U+FEFF) and the line and paragraph separators
//     U+2028 and U+2029 as \uXXXX (\UXXXXXXXX above the BMP);
//   - each byte that is not valid UTF-8 as \xNN;
//   - a backslash as \\, so that an escape is never ambiguous with text
//     that spells one.
//
// Everything else, letters of any script included, is kept as it is.
package termtext

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

const hexDigits = "0123456789abcdef"

// Append appends s to b with every character a terminal would act on
// escaped visibly (see the package comment).
func Append(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b = appendRune(b, r, n, c)
		i += n
	}
	return b
}

// AppendBytes is Append for a byte slice (a comm, a path from the kernel).
func AppendBytes(b, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		b = appendRune(b, r, n, c)
		i += n
	}
	return b
}

// String returns s made safe for a terminal.
func String(s string) string {
	if Safe(s) {
		return s
	}
	return string(Append(make([]byte, 0, len(s)+8), s))
}

// Safe reports whether Append would write s unchanged.
func Safe(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if escaped(r, n) {
			return false
		}
		i += n
	}
	return true
}

// appendRune writes one decoded rune (n bytes long, first byte c), escaped
// when it must be.
func appendRune(b []byte, r rune, n int, c byte) []byte {
	switch {
	case r == utf8.RuneError && n <= 1:
		return appendHexByte(b, c)
	case r == '\\':
		return append(b, '\\', '\\')
	case r < 0x20 || r == 0x7f:
		return appendHexByte(b, byte(r))
	case escaped(r, n):
		return appendUnicode(b, r)
	}
	return utf8.AppendRune(b, r)
}

// escaped reports whether the rune r, decoded from n bytes, must not reach a
// terminal as it is.
func escaped(r rune, n int) bool {
	if r == utf8.RuneError && n <= 1 {
		return true
	}
	if r < 0x20 || r == 0x7f || r == '\\' {
		return true
	}
	if r < 0x80 {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

func appendHexByte(b []byte, c byte) []byte {
	return append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
}

func appendUnicode(b []byte, r rune) []byte {
	if r > 0xffff {
		b = append(b, '\\', 'U')
		for shift := 28; shift >= 0; shift -= 4 {
			b = append(b, hexDigits[(r>>shift)&0xf])
		}
		return b
	}
	b = append(b, '\\', 'u')
	for shift := 12; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(r>>shift)&0xf])
	}
	return b
}

// Width is the number of terminal columns s takes once made safe: the
// columns of Append(nil, s). East Asian wide and fullwidth characters take
// two, combining marks none.
func Width(s string) int {
	w := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			w++
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		w += runeWidth(r, n)
		i += n
	}
	return w
}

// Columns is the number of terminal columns that text already made safe
// (by Append, or read back from a terminal) takes as it is: what a test
// holds a screen's lines against.
func Columns(s string) int {
	w := 0
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Mn, unicode.Me):
		case width.LookupRune(r).Kind() == width.EastAsianWide, width.LookupRune(r).Kind() == width.EastAsianFullwidth:
			w += 2
		default:
			w++
		}
	}
	return w
}

// runeWidth is the columns one rune takes as Append writes it.
func runeWidth(r rune, n int) int {
	switch {
	case r == utf8.RuneError && n <= 1, r < 0x20, r == 0x7f:
		return 4 // \xNN
	case r == '\\':
		return 2
	case escaped(r, n):
		if r > 0xffff {
			return 10
		}
		return 6
	case unicode.In(r, unicode.Mn, unicode.Me):
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// Ellipsis ends text that AppendFit cut.
const Ellipsis = "…"

// AppendFit appends s made safe, cut so that it takes at most cols columns:
// when it does not fit, it ends with Ellipsis within those columns. An escape
// is never cut in two. cols below 1 appends nothing.
func AppendFit(b []byte, s string, cols int) []byte {
	if cols < 1 {
		return b
	}
	if Width(s) <= cols {
		return Append(b, s)
	}
	w := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		rw := runeWidth(r, n)
		if w+rw > cols-1 {
			break
		}
		b = appendRune(b, r, n, s[i])
		w += rw
		i += n
	}
	return append(b, Ellipsis...)
}

// Cut splits s where its safe form reaches cols columns: head is the
// longest prefix whose Append takes at most cols columns (an escape is
// never split), rest what follows. A first character wider than cols goes
// into head all the same, so that a caller that loops on rest always moves
// on.
func Cut(s string, cols int) (head, rest string) {
	w := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		rw := runeWidth(r, n)
		if w+rw > cols {
			if i == 0 {
				return s[:n], s[n:]
			}
			return s[:i], s[i:]
		}
		w += rw
		i += n
	}
	return s, ""
}

// Fit returns s made safe and cut to at most cols columns (see AppendFit).
func Fit(s string, cols int) string {
	return string(AppendFit(nil, s, cols))
}
