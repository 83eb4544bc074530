package explain

import (
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/eaddr/eaddr/decode"
)

// Identification is what `eaddr explain` makes of a pasted message.
type Identification struct {
	Errno   int            // 0: not known (curl hides it)
	Syscall decode.Syscall // 0: not known
	Client  *Client        // nil: a bare strerror text, errno name or number
	Libc    Libc           // whose wording it is, when the text says
	// Lang: the text is glibc's strerror translated into these languages
	// ("de", "pt, pt_BR"); "" for the C locale's words.
	Lang string
	IP   netip.Addr
	Port uint16
	// Matched is the part of the input that was recognised.
	Matched string
	score   int
	addrEnd int // where in the input the address (ip, host, port) ends; 0: none
}

type compiled struct {
	client  *Client
	msg     message
	re      *regexp.Regexp
	literal int // literal characters: more is more specific
}

var placeholderRe = map[string]string{
	"ip":          `(?P<ip>[0-9A-Fa-f:.]+)`,
	"port":        `(?P<port>[0-9]+)`,
	"addr":        `\[?(?P<ip>[0-9A-Fa-f:.]+?)\]?:(?P<port>[0-9]+)`,
	"ipv4_paren":  `(?: \((?P<ip>[0-9.]+)\))?`,
	"strerror":    `(?P<strerror>[A-Za-z][A-Za-z ,'/-]*?)`,
	"strerror_uv": `(?P<strerror>[a-z][a-z ,'/-]*?)`,
	"errno":       `(?P<errno>E[A-Z0-9]+)`,
	"errno_num":   `(?P<errno_num>[0-9]+)`,
	"syscall":     `(?P<syscall>connect|bind)`,
	"prog":        `(?P<prog>[^\s:\[\]]+)`,
	"applet":      `(?P<prog>[a-z][a-z0-9_.-]*)`,
	"pid":         `[0-9]+`,
	"fd":          `[0-9]+`,
	"af":          `[0-9]+`,
	"af_name":     `\w+`,
	"addrlen":     `[0-9]+`,
	"ms":          `[0-9]+`,
	"host":        `(?P<host>\S+?)`,
	"listen_addr": `\[?(?P<ip>[0-9A-Fa-f:.]*?)\]?:(?P<port>[0-9]+)`,
	"addr_full":   `\[?(?P<ip>[0-9A-Fa-f:.]+?)\]?:(?P<port>[0-9]+)`,
	"local_any":   `(?:0\.0\.0\.0:0|:::0)`,
	"lbrace":      `\{`,
	"rbrace":      `\}`,
	"service":     `[^()]*`,
	"ptr":         `0x[0-9a-fA-F]+`,
	"timestamp":   `[0-9A-Za-z][0-9A-Za-z:./ ,+-]*?`,
}

// compile turns a message template into a regular expression, unanchored so
// that a log prefix (time, pod name) does not matter.
func compile(tmpl string) (*regexp.Regexp, int) {
	var sb strings.Builder
	literal := 0
	for len(tmpl) > 0 {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			sb.WriteString(regexp.QuoteMeta(tmpl))
			literal += len(tmpl)
			break
		}
		sb.WriteString(regexp.QuoteMeta(tmpl[:i]))
		literal += i
		j := strings.IndexByte(tmpl[i:], '}')
		name := tmpl[i+1 : i+j]
		sb.WriteString(placeholderRe[name])
		tmpl = tmpl[i+j+1:]
	}
	// A strerror at the very end would match lazily to nothing: let it run
	// to the end of the line, but not over a final period.
	s := strings.Replace(sb.String(), `*?)`, `*)`, -1)
	return regexp.MustCompile(`(?i)` + s), literal
}

// Identify recognises a pasted error message (or an errno name or number)
// and returns the candidates, best first. Nothing recognised: empty.
func (c *Catalog) Identify(input string) []Identification {
	return c.identify(input, true)
}

// identify is Identify; a line of a log (alone false) is not read as an
// errno number: a line "1" is no EPERM.
func (c *Catalog) identify(input string, alone bool) []Identification {
	input = strings.TrimSpace(input)
	if input == "" {
		return nil
	}
	if n, err := decode.ParseErrno(input); err == nil && (alone || !isDigits(input)) {
		return []Identification{{Errno: n, Matched: input, score: 1 << 20}}
	}
	var out []Identification
	for _, cp := range c.compiled() {
		idx := cp.re.FindStringSubmatchIndex(input)
		if idx == nil {
			continue
		}
		id, strerr := cp.read(input, idx)
		if strerr != "" {
			n, libc, ok := errnoByText(strerr, cp.client.Libcs)
			if !ok {
				continue // the words are not an errno text: a false match
			}
			if id.Errno != 0 && id.Errno != n {
				continue
			}
			id.Errno, id.Libc = n, libc
			id.score += len(strerr)
		} else if len(cp.client.Libcs) == 1 && cp.client.Libcs[0] == libcGo {
			id.Libc = libcGo
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		// A bare errno text or name somewhere in the line, else glibc's
		// translation of one.
		if n, libc, text, ok := findErrnoText(input); ok {
			out = append(out, Identification{Errno: n, Libc: libc, Matched: text, score: len(text)})
		} else if t, text, ok := findTranslation(input); ok {
			out = append(out, Identification{Errno: t.Errno, Libc: libcGlibc, Lang: t.Langs, Matched: text, score: len(text)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	return dedupe(out)
}

// read makes an Identification of cp's match in input (idx: its
// submatches' offsets), and returns the strerror text it holds, if any.
func (cp *compiled) read(input string, idx []int) (Identification, string) {
	id := Identification{Client: cp.client, Matched: input[idx[0]:idx[1]], score: cp.literal}
	if cp.msg.Syscall != "*" {
		id.Syscall = syscallByName(cp.msg.Syscall)
	}
	if n, err := decode.ParseErrno(cp.msg.Errno); err == nil {
		id.Errno = n
	}
	var strerr string
	for i, name := range cp.re.SubexpNames() {
		if idx[2*i] < 0 || idx[2*i] == idx[2*i+1] {
			continue
		}
		m := input[idx[2*i]:idx[2*i+1]]
		switch name {
		case "ip", "host", "port":
			id.readAddr(name, m)
			id.addrEnd = max(id.addrEnd, idx[2*i+1])
		case "errno":
			if n, err := decode.ParseErrno(m); err == nil {
				id.Errno = n
			}
		case "errno_num":
			if n, err := strconv.Atoi(m); err == nil {
				id.Errno = n
			}
		case "syscall":
			id.Syscall = syscallByName(strings.ToLower(m))
		case "strerror":
			strerr = m
		}
	}
	return id, strerr
}

// readAddr takes the ip, host or port placeholder's text m.
func (id *Identification) readAddr(name, m string) {
	switch name {
	case "ip":
		if ip, err := netip.ParseAddr(m); err == nil {
			id.IP = ip.Unmap()
		}
	case "host":
		// A host as typed: an IP ([IPv6] in curl's HOST:PORT), or ip:port
		// in wget's line.
		if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(m, "["), "]")); err == nil {
			id.IP = ip.Unmap()
		} else if ap, err := netip.ParseAddrPort(m); err == nil {
			id.IP, id.Port = ap.Addr().Unmap(), ap.Port()
		}
	case "port":
		if p, err := strconv.ParseUint(m, 10, 16); err == nil {
			id.Port = uint16(p)
		}
	}
}

func dedupe(ids []Identification) []Identification {
	var out []Identification
	for _, id := range ids {
		dup := false
		for _, o := range out {
			if o.Client == id.Client && o.Errno == id.Errno && o.Libc == id.Libc {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, id)
		}
	}
	return out
}

func syscallByName(s string) decode.Syscall {
	switch s {
	case "connect":
		return decode.Connect
	case "bind":
		return decode.Bind
	}
	return 0
}

// errnoByText finds the errno whose strerror is text, trying the given
// libcs first, then all. Case matters first (it tells Go from glibc).
func errnoByText(text string, prefer []Libc) (int, Libc, bool) {
	text = strings.TrimRight(strings.TrimSpace(text), ".")
	libcs := append(append([]Libc(nil), prefer...), libcGlibc, libcMusl, libcGo)
	for _, fold := range []bool{false, true} {
		for _, libc := range libcs {
			for n := 1; n <= strerrorMax; n++ {
				s, ok := strerror(libc, n)
				if !ok {
					continue
				}
				if s == text || (fold && strings.EqualFold(s, text)) {
					return n, libc, true
				}
			}
		}
	}
	return 0, "", false
}

// findErrnoText looks for the longest errno text or errno name inside input.
func findErrnoText(input string) (int, Libc, string, bool) {
	best, bestLibc, bestText := 0, Libc(""), ""
	for _, libc := range []Libc{libcGlibc, libcMusl, libcGo} {
		for n := 1; n <= strerrorMax; n++ {
			s, ok := strerror(libc, n)
			if !ok || len(s) <= len(bestText) || len(s) < 8 {
				continue
			}
			i := indexFoldASCII(input, s)
			if i < 0 {
				continue
			}
			// Case tells Go's table from glibc's.
			l := libc
			if libc != libcMusl && input[i:i+len(s)] != s {
				if gs, _ := strerror(libcGo, n); input[i:i+len(s)] == gs {
					l = libcGo
				}
			}
			best, bestLibc, bestText = n, l, input[i:i+len(s)]
		}
	}
	if best != 0 {
		return best, bestLibc, bestText, true
	}
	for _, f := range strings.FieldsFunc(input, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if strings.HasPrefix(f, "E") {
			if n, err := decode.ParseErrno(f); err == nil {
				return n, "", f, true
			}
		}
	}
	return 0, "", "", false
}

// findTranslation looks for the longest of glibc's translations of an
// errno text inside input (case folded as far as ASCII goes).
func findTranslation(input string) (*translation, string, bool) {
	var best *translation
	text := ""
	for i := range glibcTranslations {
		t := &glibcTranslations[i]
		if len(t.Text) <= len(text) {
			continue
		}
		if j := indexFoldASCII(input, t.Text); j >= 0 {
			best, text = t, input[j:j+len(t.Text)]
		}
	}
	return best, text, best != nil
}

// LooksTranslated reports whether s has letters other than ASCII ones, as
// a message in another language than English has.
func LooksTranslated(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII && unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// indexFoldASCII finds sub in s ignoring ASCII case, on s's own bytes (so
// that the index is valid in s whatever else it holds: strings.ToLower
// changes the length of invalid UTF-8, which FuzzIdentify found).
func indexFoldASCII(s, sub string) int {
	if sub == "" {
		return 0
	}
	// Compare only where the first byte matches in either case: a log of
	// 64 KiB is searched for some 400 texts.
	lo, up := sub[0], sub[0]
	if 'A' <= lo && lo <= 'Z' {
		lo += 'a' - 'A'
	} else if 'a' <= up && up <= 'z' {
		up -= 'a' - 'A'
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if (s[i] == lo || s[i] == up) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

var compiledCache []compiled

// minLiteral is the fixed text a wording needs to recognise its client.
const minLiteral = 6

func (c *Catalog) compiled() []compiled {
	if compiledCache != nil {
		return compiledCache
	}
	for i := range c.Clients {
		cl := &c.Clients[i]
		for _, m := range cl.Messages {
			for _, text := range append([]string{m.Text}, m.Also...) {
				re, lit := compile(text)
				if lit < minLiteral {
					// "{prog}: {strerror}" would take any "word: text"
					// for this client's: too little to recognise it by.
					continue
				}
				compiledCache = append(compiledCache, compiled{client: cl, msg: m, re: re, literal: lit})
				// People quote messages without the program's "name: "
				// prefix; recognise that too, as less specific.
				if rest, ok := withoutProgPrefix(text, cl); ok {
					re, lit := compile(rest)
					compiledCache = append(compiledCache, compiled{client: cl, msg: m, re: re, literal: lit})
				}
			}
		}
	}
	return compiledCache
}

// withoutProgPrefix strips a leading "{prog}: " or "NAME: " where NAME is
// one of the client's program names, when enough text is left to go on.
func withoutProgPrefix(tmpl string, cl *Client) (string, bool) {
	i := strings.Index(tmpl, ": ")
	if i <= 0 {
		return "", false
	}
	p := tmpl[:i]
	if p != "{prog}" && p != cl.Prog && !contains(cl.Match.Exe, p) && !contains(cl.Match.Applet, p) {
		return "", false
	}
	rest := tmpl[i+2:]
	if _, lit := compile(rest); lit < minLiteral {
		return "", false
	}
	return rest, true
}

// closestFailures are the failures whose wordings Closest offers: the two
// eaddr is about, and a refused connect, which people mistake for them. Each client is asked for its wording of
// each (Client.template), so that a text only a failure the call cannot
// have would give (bind() refused) is never offered.
var closestFailures = [...]struct {
	sys   decode.Syscall
	errno int
}{
	{decode.Connect, decode.EADDRNOTAVAIL},
	{decode.Bind, decode.EADDRINUSE},
	{decode.Connect, 111}, // ECONNREFUSED
}

// Closest returns up to n catalogued wordings most like input (by shared
// words), for when nothing was recognised. What a wording needs and the
// input does not give (the address, a pid) is written <ip>, <pid> ...
func (c *Catalog) Closest(input string, n int) []Wording {
	words := wordSet(input)
	type scored struct {
		w     Wording
		score float64
	}
	var all []scored
	for i := range c.Clients {
		cl := &c.Clients[i]
		for _, f := range closestFailures {
			if len(cl.Match.errnos) > 0 && !containsInt(cl.Match.errnos, f.errno) {
				continue
			}
			tmpl, ok := cl.template(f.sys, f.errno)
			if !ok {
				continue
			}
			for _, libc := range cl.Libcs {
				v := msgVars{Syscall: f.sys, Errno: f.errno, Libc: libc, Prog: cl.prog, Applet: cl.applet, Shown: true}
				text, ok := render(nil, tmpl, &v)
				if !ok {
					continue
				}
				if score := overlap(words, wordSet(string(text))); score > 0 {
					all = append(all, scored{Wording{By: []byte(cl.Name + " (" + string(libc) + ")"), Text: text}, score})
				}
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	var out []Wording
	for _, s := range all {
		dup := false
		for _, o := range out {
			if string(o.Text) == string(s.w.Text) {
				dup = true
			}
		}
		if !dup {
			out = append(out, s.w)
		}
		if len(out) == n {
			break
		}
	}
	return out
}

// overlap is the Jaccard index of two word sets: shared over all.
func overlap(a, b map[string]bool) float64 {
	common := 0
	for w := range a {
		if b[w] {
			common++
		}
	}
	if common == 0 {
		return 0
	}
	return float64(common) / float64(len(a)+len(b)-common)
}

func syscallOr(s string) decode.Syscall {
	if sc := syscallByName(s); sc != 0 {
		return sc
	}
	return decode.Connect
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(f) > 1 {
			m[f] = true
		}
	}
	return m
}
