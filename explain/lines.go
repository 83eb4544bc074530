package explain

import (
	"net/netip"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Reading is what `eaddr explain` makes of a pasted text: one message, or
// a log (`kubectl logs POD | eaddr explain`) whose lines carry failures
// among other lines.
type Reading struct {
	Lines int // non-empty lines in the text
	// Line is the line explained (1-based, counting every line), 0 when
	// none is recognised; Text is that line, IDs its readings, best first.
	Line int
	Text string
	IDs  []Identification
	// Recognised are the lines that carry a failure, 1-based, in order.
	Recognised []int
}

// ReadText recognises the lines of text and picks the one to explain: a
// failure eaddr is about (EADDRNOTAVAIL, EADDRINUSE) before a text without
// the errno (curl's), before any other, then the most specific reading
// (a client's wording before a bare errno text), then the last such line,
// the most recent in a log. cut says the text is the start of a longer
// input: its last line may end inside an address, so an address that ends
// where the text ends is not read.
func (c *Catalog) ReadText(text string, cut bool) Reading {
	lines := strings.Split(text, "\n")
	last := len(lines) - 1
	for last > 0 && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	var r Reading
	for _, line := range lines {
		if strings.TrimSpace(line) != "" {
			r.Lines++
		}
	}
	best := Identification{}
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		ids := c.identify(line, r.Lines == 1)
		if len(ids) == 0 {
			continue
		}
		if cut && i == last {
			forgetCutAddress(ids, line)
		}
		r.Recognised = append(r.Recognised, i+1)
		if r.IDs == nil || better(ids[0], best) {
			r.Line, r.Text, r.IDs, best = i+1, line, ids, ids[0]
		}
	}
	return r
}

// better: a is worth explaining rather than b (a comes later in the text).
func better(a, b Identification) bool {
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra > rb
	}
	return a.score >= b.score
}

// rank: the failures eaddr is about first, then a text that hides its
// errno (curl's, which may be one of them), then any other.
func rank(id Identification) int {
	switch id.Errno {
	case decode.EADDRNOTAVAIL, decode.EADDRINUSE:
		return 2
	case 0:
		return 1
	}
	return 0
}

// forgetCutAddress drops the address of readings whose address ends where
// a cut line ends: "10.96.0.1" may have been "10.96.0.10", port 8 port 80.
func forgetCutAddress(ids []Identification, line string) {
	for i := range ids {
		if ids[i].addrEnd == len(line) {
			ids[i].IP, ids[i].Port = netip.Addr{}, 0
		}
	}
}
