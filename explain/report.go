package explain

import (
	"github.com/eaddr/eaddr/decode"
)

// Report is everything `eaddr explain` says about one pasted line, finished
// for output to render.
type Report struct {
	ID Identification // the best reading of the text
	// Also are the other clients whose wording the text fits as well as
	// the best reading's (the same words from several programs).
	Also     []Identification
	Syscall  decode.Syscall
	SysGuess bool       // syscall inferred, not read from the text
	Meaning  *ErrnoInfo // nil: the catalog does not know the errno (or the text does not carry it)
	// Summary is the meaning in one sentence: Meaning's Short, else its
	// Meaning; for a text without the errno, how to find it.
	Summary string
	// Other is how the same failure reads in every catalogued client and
	// libc, with what the text does not carry written <ip>, <port> ...
	Other []Wording
	// ClientName is the client the text was recognised as, or "".
	ClientName string
	// Confirm are the commands that confirm the cause, built only from what
	// the text carries; Placeholders say what their words in capitals stand
	// for.
	Confirm      []Command
	Placeholders []Placeholder
}

// NewReport reads ids (best first; at least one) as a Report.
func (ex *Explainer) NewReport(ids []Identification) *Report {
	r := &Report{ID: ids[0]}
	for _, id := range ids[1:] {
		if id.score == r.ID.score && id.Client != nil {
			r.Also = append(r.Also, id)
		}
	}
	r.Syscall = r.ID.Syscall
	if r.Syscall == 0 {
		// Port exhaustion shows as EADDRNOTAVAIL in connect() and as
		// EADDRINUSE in a bind() before connect.
		r.SysGuess = true
		r.Syscall = decode.Connect
		if r.ID.Errno == decode.EADDRINUSE {
			r.Syscall = decode.Bind
		}
	}
	info := &ex.Catalog.UnknownErrno
	if r.ID.Errno != 0 {
		r.Meaning = ex.Catalog.meaningOf(r.Syscall, r.ID.Errno, "") // a pasted line does not say the protocol
		info = r.Meaning
		r.Other = ex.otherWordings(r)
	}
	if info != nil {
		r.Summary = info.Short
		if r.Summary == "" {
			r.Summary = info.Meaning
		}
	}
	if r.ID.Client != nil {
		r.ClientName = r.ID.Client.Name
	}
	var checks []Check
	if info != nil {
		checks = info.Confirm
	}
	r.Confirm, r.Placeholders = confirm(checks, &r.ID, r.Syscall)
	return r
}

// otherWordings is how r's failure reads in every client and libc, from
// what the text carries only.
func (ex *Explainer) otherWordings(r *Report) []Wording {
	v := msgVars{Syscall: r.Syscall, Errno: r.ID.Errno, IP: r.ID.IP, Port: r.ID.Port, Shown: true}
	if v.IP.IsValid() {
		v.Family, v.Addrlen = decode.AFInet, 16
		if v.IP.Is6() {
			v.Family, v.Addrlen = decode.AFInet6, 28
		}
	}
	var words wordingBufs
	var out []Wording
	for _, w := range words.fill(ex.Catalog, &v) {
		out = append(out, Wording{By: append([]byte(nil), w.By...), Text: append([]byte(nil), w.Text...)})
	}
	return out
}
