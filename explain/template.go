package explain

// The rendering of a catalog message template ("{prog}: {strerror}") with
// what one event tells of the program and its failure.

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// msgVars are the values a template is filled with.
type msgVars struct {
	Syscall decode.Syscall
	Errno   int
	Libc    Libc
	IP      netip.Addr // remote for connect, local for bind; invalid if unknown
	Port    uint16
	Prog    []byte // argv[0] base name
	Applet  []byte // a busybox applet's name (comm, or argv[1] of `busybox APPLET`)
	PID     uint32
	FD      int32
	Family  uint16
	Addrlen int
	// Shown: a pasted text, not an event: what it does not carry (the IP,
	// the port, a pid ...) is written <name>, never guessed (see shown).
	Shown bool
}

// render appends tmpl filled with v. ok is false when the template needs a
// value that is unknown (the libc's strerror when the libc is unknown, or
// the address), so that a guess is never shown as a prediction. The parts
// no event can tell (see unknowable) are written <name>.
func render(b []byte, tmpl string, v *msgVars) (_ []byte, ok bool) {
	ok = true
	for len(tmpl) > 0 {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			return append(b, tmpl...), ok
		}
		b = append(b, tmpl[:i]...)
		tmpl = tmpl[i:]
		j := strings.IndexByte(tmpl, '}')
		if j < 0 {
			return append(b, tmpl...), ok
		}
		var good bool
		if name := tmpl[1:j]; v.Shown && !v.carries(name) {
			b, good = appendNotCarried(b, name, v), true
		} else {
			b, good = appendVar(b, name, v)
		}
		ok = ok && good
		tmpl = tmpl[j+1:]
	}
	return b, ok
}

func appendVar(b []byte, name string, v *msgVars) ([]byte, bool) {
	switch name {
	case "ip":
		if !v.IP.IsValid() {
			return b, false
		}
		return v.IP.AppendTo(b), true
	case "port":
		return strconv.AppendUint(b, uint64(v.Port), 10), true
	case "addr":
		if !v.IP.IsValid() {
			return b, false
		}
		return netip.AddrPortFrom(v.IP, v.Port).AppendTo(b), true
	case "ipv4_paren":
		if v.IP.Is4() {
			b = append(b, " ("...)
			b = v.IP.AppendTo(b)
			return append(b, ')'), true
		}
		return b, v.IP.IsValid()
	case "strerror":
		s, ok := strerror(v.Libc, v.Errno)
		return append(b, s...), ok
	case "strerror_uv":
		// libuv's uv_strerror: glibc's words in lower case, but for these.
		switch v.Errno {
		case decode.EADDRNOTAVAIL:
			return append(b, "address not available"...), true
		}
		s, ok := strerror(libcGo, v.Errno)
		return append(b, s...), ok
	case "errno":
		return append(b, decode.ErrnoName(v.Errno)...), true
	case "errno_num":
		return strconv.AppendInt(b, int64(v.Errno), 10), true
	case "syscall":
		return append(b, v.Syscall.String()...), true
	case "prog":
		return append(b, v.Prog...), len(v.Prog) > 0
	case "applet":
		return append(b, v.Applet...), len(v.Applet) > 0
	case "pid":
		return strconv.AppendUint(b, uint64(v.PID), 10), true
	case "fd":
		return strconv.AppendInt(b, int64(v.FD), 10), true
	case "af":
		return strconv.AppendUint(b, uint64(v.Family), 10), true
	case "af_name":
		return append(b, decode.FamilyName(v.Family)...), true
	case "addrlen":
		return strconv.AppendInt(b, int64(v.Addrlen), 10), true
	case "ms", "host", "ptr", "timestamp", "service", "rest":
		// Unknowable: the message is a template (ConfidenceTemplate).
		return append(append(append(b, '<'), name...), '>'), true
	case "listen_addr", "addr_full", "local_any":
		return appendShapedAddr(b, name, v)
	case "lbrace":
		return append(b, '{'), true
	case "rbrace":
		return append(b, '}'), true
	}
	return append(b, "{"+name+"}"...), false
}

// carries reports whether v, which describes a pasted text, holds the value
// the placeholder name needs. A pasted text never gives eaddr a pid or an
// fd (a number in it is not known to be one), and a port only when
// Identify read one.
func (v *msgVars) carries(name string) bool {
	switch name {
	case "ip", "ipv4_paren":
		return v.IP.IsValid()
	case "port":
		return v.Port != 0
	case "addr", "addr_full", "listen_addr":
		return v.IP.IsValid() && v.Port != 0
	case "pid", "fd":
		return false
	case "af", "af_name", "addrlen", "local_any":
		return v.Family != 0
	}
	return true
}

// appendNotCarried writes what a pasted text does not carry as <name>,
// keeping the part it does: "1.1.1.1:<port>".
func appendNotCarried(b []byte, name string, v *msgVars) []byte {
	switch name {
	case "ipv4_paren":
		return append(b, " (<ip>)"...)
	case "addr", "addr_full", "listen_addr":
		if v.IP.IsValid() {
			if v.IP.Is6() {
				return append(append(append(v.IP.AppendTo(append(b, '[')), ']'), ':'), "<port>"...)
			}
			return append(v.IP.AppendTo(b), ":<port>"...)
		}
		if v.Port != 0 {
			return strconv.AppendUint(append(b, "<ip>:"...), uint64(v.Port), 10)
		}
		return append(b, "<ip>:<port>"...)
	case "local_any":
		return append(b, "<local address>"...)
	}
	return append(append(append(b, '<'), name...), '>')
}

// appendShapedAddr writes the address the way some clients shape it.
func appendShapedAddr(b []byte, name string, v *msgVars) ([]byte, bool) {
	switch name {
	case "listen_addr":
		// The address as the program was given it: known only when it is
		// not the wildcard (Go prints ":8080" for an empty host).
		if !v.IP.IsValid() {
			return b, false
		}
		if v.IP.IsUnspecified() {
			b = append(b, "<host>:"...)
			return strconv.AppendUint(b, uint64(v.Port), 10), true
		}
		return netip.AddrPortFrom(v.IP, v.Port).AppendTo(b), true
	case "addr_full":
		// socat: an IPv6 address written out in full, 8 groups of 4.
		if !v.IP.IsValid() {
			return b, false
		}
		if !v.IP.Is6() {
			return netip.AddrPortFrom(v.IP, v.Port).AppendTo(b), true
		}
		b = append(b, '[')
		a := v.IP.As16()
		for i := 0; i < 16; i += 2 {
			if i > 0 {
				b = append(b, ':')
			}
			b = appendHex4(b, uint16(a[i])<<8|uint16(a[i+1]))
		}
		b = append(b, "]:"...)
		return strconv.AppendUint(b, uint64(v.Port), 10), true
	case "local_any":
		// Node: the unbound local address of the family.
		if v.Family == decode.AFInet6 {
			return append(b, ":::0"...), true
		}
		return append(b, "0.0.0.0:0"...), true
	}
	return b, false
}

func appendHex4(b []byte, x uint16) []byte {
	const digits = "0123456789abcdef"
	return append(b, digits[x>>12], digits[x>>8&15], digits[x>>4&15], digits[x&15])
}
