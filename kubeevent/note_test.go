package kubeevent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/eaddr/eaddr/internal/termtext"
)

// hostileNote is an 889-byte note as a workload can make one: the verdict
// names a process whose name and path are the workload's own, with an OSC
// 52 clipboard write, a screen clear, newlines, a C1 CSI, a bidi override
// and 200 bytes that are not UTF-8. Sent raw, the API server's JSON
// decoding turns each of those bytes into U+FFFD (three bytes): 1,289
// bytes, over its 1,024, as the review that found it measured.
func hostileNote() string {
	var b strings.Builder
	b.WriteString("ephemeral ports exhausted toward 10.96.0.10:80: held by pid 4242 \x1b]52;c;ZXZpbA==\x07\x1b[2J\r\n")
	b.WriteString("exe /tmp/\xc2\x9b31m\u202egnp.exe\n")
	for range 200 {
		b.WriteString("\xffab")
	}
	for b.Len() < 889 {
		b.WriteString("x")
	}
	return b.String()
}

// How the API server counts a note: the length of the Go string its JSON
// decoder made of what was sent (validation: len(event.Message)).
func serverLen(t testing.TB, note string) int {
	b, err := json.Marshal(note)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return len(got)
}

func TestCleanNoteHostile(t *testing.T) {
	raw := hostileNote()
	if n := serverLen(t, raw); len(raw) != 889 || n != 1289 {
		t.Fatalf("the raw hostile note is %d bytes, %d at the API server: want 889 and 1289", len(raw), n)
	}
	got := cleanNote(raw, noteMax)
	checkNote(t, raw, got, noteMax)
	if !strings.HasSuffix(got, cutMark) || !strings.HasPrefix(got, `ephemeral ports exhausted toward 10.96.0.10:80: held by pid 4242 \x1b]52;c;ZXZpbA==\x07\x1b[2J\x0d\x0a`) {
		t.Errorf("note %q: want the escaped form, cut with %q", got, cutMark)
	}
	if short := "held by pid 7 nc"; cleanNote(short, noteMax) != short {
		t.Errorf("a plain note changed: %q", cleanNote(short, noteMax))
	}
}

// checkNote holds a cleaned note to what the API server and a terminal
// need: valid UTF-8, at most n bytes as the API server counts them, no
// control character (C0, DEL, C1) and nothing termtext would escape; and
// to what it says: all of raw's escaped form when that fits, else a prefix
// of it that ends between two escapes, then the cut mark.
func checkNote(t *testing.T, raw, got string, n int) {
	t.Helper()
	if !utf8.ValidString(got) || len(got) > n || serverLen(t, got) != len(got) {
		t.Fatalf("note %q: valid %v, %d bytes, %d at the API server; want valid UTF-8 of at most %d", got, utf8.ValidString(got), len(got), serverLen(t, got), n)
	}
	for _, r := range got {
		if r < 0x20 || r == 0x7f || unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			t.Fatalf("note %q holds %U", got, r)
		}
	}
	if !termtext.Safe(strings.ReplaceAll(got, `\`, "")) {
		t.Fatalf("note %q: termtext would escape some of it", got)
	}
	full := string(termtext.Append(nil, raw))
	if len(full) <= n {
		if got != full {
			t.Fatalf("note %q, want all of %q", got, full)
		}
		return
	}
	head, cut := strings.CutSuffix(got, cutMark)
	if !cut {
		t.Fatalf("note %q of %q: cut without %q", got, full, cutMark)
	}
	for i := 0; ; {
		esc := string(termtext.Append(nil, raw[:i]))
		if esc == head {
			return
		}
		if len(esc) > len(head) || i == len(raw) {
			t.Fatalf("note %q: %q is no prefix of %q that ends between escapes", got, head, full)
		}
		_, size := utf8.DecodeRuneInString(raw[i:])
		i += size
	}
}

// Any bytes, cleaned and cut, make a note the API server takes (checkNote).
func FuzzCleanNote(f *testing.F) {
	f.Add(hostileNote(), noteMax)
	f.Add("ephemeral ports exhausted toward 127.0.0.1:8080", noteMax)
	f.Add(strings.Repeat("\xff", 2000), noteMax)
	f.Add(strings.Repeat("é", 600), 11)
	f.Add("\\\\x1b", 5)
	f.Fuzz(func(t *testing.T, raw string, n int) {
		n = len(cutMark) + int(uint(n)%(2*noteMax))
		checkNote(t, raw, cleanNote(raw, n), n)
	})
}
