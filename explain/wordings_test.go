package explain

import (
	"strings"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

// A client that shows the same cause in bind() or in connect() (busybox nc
// built with NC_110_COMPAT, OpenBSD nc with -p/-s) has both wordings
// listed, and "binds before connect" labels the bind() one, in the
// EADDRNOTAVAIL view and in the EADDRINUSE view alike.
func TestBindOrderLabels(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []msgVars{
		{Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, Shown: true},
		{Syscall: decode.Bind, Errno: decode.EADDRINUSE, Shown: true},
	} {
		var words wordingBufs
		labelled := map[string]int{}
		for _, w := range words.fill(c, &view) {
			by, text := string(w.By), string(w.Text)
			switch {
			case strings.Contains(by, "binds before connect"):
				labelled["bind"]++
				if !strings.Contains(text, "bind") {
					t.Errorf("%v view: %q is labelled %q but is no bind() failure", view.Syscall, text, by)
				}
			case strings.Contains(by, "no bind first"):
				labelled["connect"]++
				if strings.Contains(text, "bind") {
					t.Errorf("%v view: %q is labelled %q but is a bind() failure", view.Syscall, text, by)
				}
			}
		}
		// busybox nc and OpenBSD nc, each with musl and glibc
		if labelled["bind"] != 4 || labelled["connect"] != 4 {
			t.Errorf("%v view: %v labelled wordings, want 4 of each", view.Syscall, labelled)
		}
	}
}

// The closest wordings are ones a client prints: its wording for a
// failure its call can have (connect() refused, not bind() refused: Java
// never prints "BindException: Connection refused"), with what the input
// does not carry written <ip>, <port>.
func TestClosestOffersOnlyPrinted(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]bool{}
	for _, f := range closestFailures {
		var words wordingBufs
		v := msgVars{Syscall: f.sys, Errno: f.errno, Shown: true}
		for _, w := range words.fill(c, &v) {
			printed[string(w.Text)] = true
		}
	}
	for _, in := range []string{
		"java.net.BindException: Connection refused",
		"BindException",
		"Connection refused",
		"the printer is on fire",
		"can't connect to the remote",
		"socat E connect refused",
		"nc: bind failed",
	} {
		for _, w := range c.Closest(in, 5) {
			text := string(w.Text)
			if !printed[text] {
				t.Errorf("%q: closest %s %q is no wording of a client for a failure its call can have", in, w.By, text)
			}
			if strings.Contains(text, "10.96.0.10") || strings.Contains(text, ":80") || strings.Contains(text, "[1]") {
				t.Errorf("%q: closest %q holds an address, port or pid the input does not", in, text)
			}
		}
	}
	for _, w := range c.Closest("java.net.BindException: Connection refused", 50) {
		if string(w.Text) == "java.net.BindException: Connection refused" {
			t.Errorf("offered %s %q, which Java never prints", w.By, w.Text)
		}
	}
}

// curl's note dates its wordings by the releases curl's git tags them in:
// the errno went behind error 7 in 7.86.0 (commit 6267244161, PR #9554),
// "Could not connect to server" came in 8.9.0 (c074ba64a8, PR #14073).
func TestCurlNoteReleases(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.Clients {
		if cl.ID != "curl" {
			continue
		}
		for _, want := range []string{"7.86.0", "PR #9554", "8.9.0", "Could not connect to server"} {
			if !strings.Contains(cl.Note, want) {
				t.Errorf("curl's note lacks %q: %s", want, cl.Note)
			}
		}
		if strings.Contains(cl.Note, "7.83") {
			t.Errorf("curl's note says 7.83: %s", cl.Note)
		}
		return
	}
	t.Fatal("no curl in the catalog")
}
