package termtext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"curl", "curl"},
		{"", ""},
		{"python3.11", "python3.11"},
		// OSC 52: write the operator's clipboard.
		{"\x1b]52;c;ZWNobyBoaQ==\x07", `\x1b]52;c;ZWNobyBoaQ==\x07`},
		// clear the screen, move the cursor home.
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"a\rb\nc\td\x7f", `a\x0db\x0ac\x09d\x7f`},
		// C1 CSI and OSC, as UTF-8 (U+009B, U+009D).
		{"x\xc2\x9b2Jy", `x\u009b2Jy`},
		{"\u0085next line", `\u0085next line`},
		// bidi: an override turns the rest of the line around.
		{"evil\u202egpj.exe", `evil\u202egpj.exe`},
		{"\u2066x\u2069", `\u2066x\u2069`},
		{"a\u200eb\u200fc\u061c", `a\u200eb\u200fc\u061c`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		// a tag character, above the BMP.
		{"x\U000e0041", `x\U000e0041`},
		// invalid UTF-8: each byte on its own.
		{"a\xffb\xc3", `a\xffb\xc3`},
		{"\xed\xa0\x80", `\xed\xa0\x80`}, // a UTF-16 surrogate
		// a backslash is doubled so an escape is never text that spells one.
		{`\x1b`, `\\x1b`},
		// letters of any script, combining marks and wide characters stay.
		{"café Straße 名前 é", "café Straße 名前 é"},
	} {
		if got := string(Append(nil, tc.in)); got != tc.want {
			t.Errorf("Append(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(AppendBytes(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("AppendBytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if Safe(tc.in) != (tc.in == tc.want) {
			t.Errorf("Safe(%q) = %v", tc.in, Safe(tc.in))
		}
	}
}

func TestWidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"curl", 4},
		{"名前", 4},
		{"é", 1}, // e + combining acute
		{"\x1b", 4},
		{"\u202e", 6},
		{`\`, 2},
		{"\xff", 4},
		{"\U000e0041", 10},
	} {
		if got := Width(tc.in); got != tc.want {
			t.Errorf("Width(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestAppendFit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cols int
		want string
	}{
		{"default/web-7d9f", 20, "default/web-7d9f"},
		{"default/web-7d9f", 16, "default/web-7d9f"},
		{"default/web-7d9f", 10, "default/w…"},
		{"default/web-7d9f", 1, "…"},
		{"default/web-7d9f", 0, ""},
		// an escape is never cut in two: \x1b takes 4 columns.
		{"ab\x1bcd", 5, "ab…"},
		{"ab\x1bcd", 7, "ab\\x1b…"},
		// a wide character does not straddle the edge.
		{"名前です", 4, "名…"},
	} {
		got := Fit(tc.in, tc.cols)
		if got != tc.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", tc.in, tc.cols, got, tc.want)
		}
		if w := columns(got); w > tc.cols && tc.cols > 0 {
			t.Errorf("Fit(%q, %d) takes %d columns", tc.in, tc.cols, w)
		}
	}
}

// columns is Columns: text already safe, as a terminal shows it, an
// independent count to hold Width against.
func columns(s string) int { return Columns(s) }

// checkSafe fails when out holds anything a terminal would act on.
func checkSafe(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("Append(%q) = %q: not valid UTF-8", in, out)
	}
	for _, r := range out {
		if r < 0x20 || r == 0x7f || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Fatalf("Append(%q) = %q: holds %U", in, out, r)
		}
	}
	if w := Width(in); w != columns(out) {
		t.Fatalf("Width(%q) = %d, but Append writes %q, %d columns", in, w, out, columns(out))
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{"curl", "\x1b]52;c;aGk=\x07", "\xc2\x9b", "a\u202eb", "\xff\xfe", `\`, "名前", "é", "\U000e0041"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, s string, cols int) {
		out := string(Append(nil, s))
		checkSafe(t, s, out)
		if string(AppendBytes(nil, []byte(s))) != out || String(s) != out {
			t.Fatalf("Append, AppendBytes and String differ on %q", s)
		}
		if Safe(s) != (out == s) {
			t.Fatalf("Safe(%q) = %v, Append = %q", s, Safe(s), out)
		}
		cols %= 200
		fit := Fit(s, cols)
		if cols < 1 {
			if fit != "" {
				t.Fatalf("Fit(%q, %d) = %q", s, cols, fit)
			}
			return
		}
		if columns(fit) > cols {
			t.Fatalf("Fit(%q, %d) = %q: %d columns", s, cols, fit, columns(fit))
		}
		if !strings.HasPrefix(out, strings.TrimSuffix(fit, Ellipsis)) {
			t.Fatalf("Fit(%q, %d) = %q is not a prefix of %q", s, cols, fit, out)
		}
	})
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in         string
		cols       int
		head, rest string
	}{
		{"abcdef", 4, "abcd", "ef"},
		{"abc", 4, "abc", ""},
		{"ab\x1bcd", 4, "ab", "\x1bcd"}, // \x1b takes 4 columns: not split
		{"\x1bcd", 2, "\x1b", "cd"},     // wider than cols, first: taken whole
		{"名前", 3, "名", "前"},
	} {
		h, r := Cut(tc.in, tc.cols)
		if h != tc.head || r != tc.rest {
			t.Errorf("Cut(%q, %d) = %q, %q; want %q, %q", tc.in, tc.cols, h, r, tc.head, tc.rest)
		}
	}
}
