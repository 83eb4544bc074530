package explain

import (
	"bytes"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// related is the failure that the same cause shows as in a client that
// binds before it connects: an exhausted range is EADDRNOTAVAIL in
// connect() and EADDRINUSE in a port-0 bind().
func related(sys decode.Syscall, errno int) (decode.Syscall, int, bool) {
	switch {
	case sys == decode.Connect && errno == decode.EADDRNOTAVAIL:
		return decode.Bind, decode.EADDRINUSE, true
	case sys == decode.Bind && errno == decode.EADDRINUSE:
		return decode.Connect, decode.EADDRNOTAVAIL, true
	}
	return 0, 0, false
}

// Wording is one way of putting the failure into words.
type Wording struct {
	By   []byte // "glibc strerror", "curl", "busybox nc (musl, bind first)"
	Text []byte
}

// wordingBufs are the buffers of an Explanation's OtherWordings, reused
// from one Explain to the next.
type wordingBufs struct {
	text, labels []byte
	spans        [][4]int // text start, end, label start, end
	words        []Wording
}

// fill returns how the failure v describes reads from every libc and
// every client of c, each distinct text once. The result and its bytes are
// reused by the next call. It does not allocate once the buffers have
// grown.
func (e *wordingBufs) fill(c *Catalog, v *msgVars) []Wording {
	ws := wordings{e: e, v: *v}
	e.text, e.labels, e.spans = e.text[:0], e.labels[:0], e.spans[:0]
	for _, libc := range []Libc{libcGlibc, libcMusl, libcGo} {
		if s, ok := strerror(libc, v.Errno); ok {
			start, lstart := len(e.text), len(e.labels)
			e.text = append(e.text, s...)
			e.labels = append(append(e.labels, libc...), " strerror"...)
			ws.emit(start, lstart)
		}
	}
	rsys, rerrno, hasRelated := related(v.Syscall, v.Errno)
	for i := range c.Clients {
		cl := &c.Clients[i]
		both := hasRelated && bindsFirst(cl)
		for _, libc := range cl.Libcs {
			ws.try(cl, v.Syscall, v.Errno, libc, orderNote(both, v.Syscall))
			if both {
				ws.try(cl, rsys, rerrno, libc, orderNote(both, rsys))
			}
		}
	}
	e.words = e.words[:0]
	for _, sp := range e.spans {
		e.words = append(e.words, Wording{By: e.labels[sp[2]:sp[3]], Text: e.text[sp[0]:sp[1]]})
	}
	return e.words
}

// wordings is the state of one fill.
type wordings struct {
	e *wordingBufs
	v msgVars
}

// emit keeps e.text[start:] labelled e.labels[lstart:], unless that text
// was kept already.
func (w *wordings) emit(start, lstart int) {
	e := w.e
	text := e.text[start:]
	for _, sp := range e.spans {
		if bytes.Equal(e.text[sp[0]:sp[1]], text) {
			e.text, e.labels = e.text[:start], e.labels[:lstart]
			return
		}
	}
	e.spans = append(e.spans, [4]int{start, len(e.text), lstart, len(e.labels)})
}

func (w *wordings) try(cl *Client, sys decode.Syscall, errno int, libc Libc, note string) {
	if len(cl.Match.errnos) > 0 && !containsInt(cl.Match.errnos, errno) {
		return
	}
	tmpl, ok := cl.template(sys, errno)
	if !ok {
		return
	}
	e := w.e
	w.v.Syscall, w.v.Errno, w.v.Libc, w.v.Prog, w.v.Applet = sys, errno, libc, cl.prog, cl.applet
	start, lstart := len(e.text), len(e.labels)
	e.text, ok = render(e.text, tmpl, &w.v)
	if !ok {
		e.text = e.text[:start]
		return
	}
	b := append(e.labels, cl.Name...)
	// The libc is named only where the text depends on it.
	withLibc := len(cl.Libcs) > 1 && strings.Contains(tmpl, "{strerror}")
	switch {
	case withLibc && note != "":
		b = append(append(append(append(append(b, " ("...), libc...), ", "...), note...), ')')
	case withLibc:
		b = append(append(append(b, " ("...), libc...), ')')
	case note != "":
		b = append(append(append(b, " ("...), note...), ')')
	}
	e.labels = b
	w.emit(start, lstart)
}

// orderNote labels the two wordings of a client that shows the same cause
// in bind() or in connect(), by the call its text is about: the bind()
// wording is the one of a client that binds before it connects.
func orderNote(both bool, sys decode.Syscall) string {
	switch {
	case !both:
		return ""
	case sys == decode.Bind:
		return "binds before connect"
	}
	return "no bind first"
}

// bindsFirst: clients that can bind() before connect() and then fail in
// bind(): busybox nc built with NC_110_COMPAT (always), OpenBSD nc (with -s
// or -p). See their notes in catalog.json.
func bindsFirst(cl *Client) bool {
	switch cl.ID {
	case "busybox-nc", "openbsd-nc":
		return true
	}
	return false
}
