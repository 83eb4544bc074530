package explain

import (
	"net/netip"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Report is everything `eaddr explain` says about one pasted line.
type Report struct {
	ID       Identification   // the best reading of the text
	Also     []Identification // other readings of the same text
	Syscall  decode.Syscall
	SysGuess bool // syscall inferred, not read from the text
	Meaning  *ErrnoInfo
	Other    []Wording
	Addr     string // ip:port for the commands
	// ClientName is the client the text was recognised as, or "".
	ClientName string
	// Confirm are the commands that confirm the cause on the node.
	Confirm []string
}

// NewReport reads ids (best first; at least one) as a Report.
func (ex *Explainer) NewReport(ids []Identification) *Report {
	r := &Report{ID: ids[0], Also: ids[1:]}
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
	if r.ID.Errno != 0 {
		r.Meaning = ex.Catalog.meaningOf(r.Syscall, r.ID.Errno, "") // a pasted line does not say the protocol
	}
	ip, port := r.ID.IP, r.ID.Port
	if !ip.IsValid() {
		ip = netip.MustParseAddr("10.96.0.10")
	}
	if port == 0 {
		port = 80
	}
	r.Addr = netip.AddrPortFrom(ip, port).String()
	if r.ID.Errno != 0 {
		v := msgVars{Syscall: r.Syscall, Errno: r.ID.Errno, IP: ip, Port: port, PID: 1, FD: 3, Family: decode.AFInet, Addrlen: 16}
		if ip.Is6() {
			v.Family, v.Addrlen = decode.AFInet6, 28
		}
		var words wordingBufs
		for _, w := range words.fill(ex.Catalog, &v) {
			r.Other = append(r.Other, Wording{By: append([]byte(nil), w.By...), Text: append([]byte(nil), w.Text...)})
		}
	}
	if r.ID.Client != nil {
		r.ClientName = r.ID.Client.Name
	}
	r.Confirm = r.confirm()
	return r
}

// confirm are the commands that confirm the cause on the node.
func (r *Report) confirm() []string {
	var out []string
	if r.Meaning != nil {
		for _, c := range r.Meaning.Confirm {
			out = append(out, strings.ReplaceAll(c, "{addr}", r.Addr))
		}
	}
	if len(out) == 0 {
		errno := "all"
		if r.ID.Errno != 0 {
			errno = decode.ErrnoName(r.ID.Errno)
		}
		out = append(out, "eaddr trace --errno "+errno)
	}
	return out
}
