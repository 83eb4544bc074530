package explain

import (
	"bytes"
	"strings"

	"github.com/eaddr/eaddr/decode"
)

// Explanation is what eaddr can say about one event: what the errno means
// for that syscall, how the process renders errnos, which client it is,
// the line it most likely printed and how others word the same failure.
type Explanation struct {
	Meaning *ErrnoInfo // nil when the catalog does not know the errno
	// Expected says why this failure is one programs cause on purpose
	// (catalog "expected"): "" for a real one.
	Expected string
	Binary   *BinaryInfo // nil when the binary could not be analysed
	Source   string      // how the binary was found: exe, path or cache
	Client   *Client     // nil when no catalog entry matches
	Vars     MsgVars
	// Program is what an interpreter runs ("-m http.server", "app.js",
	// "-jar app.jar") or a Go program's main package; empty when unknown
	// or not an interpreter.
	Program []byte
	msg     *Message // the client's message for this failure (Explain)
	// notAnalysed is why the binary was not analysed when it was past
	// binLimits ("" otherwise).
	notAnalysed string
	seen        Seen
	prog        [64]byte
	program     [96]byte
}

// Explainer fills Explanations. Not safe for concurrent use.
type Explainer struct {
	Catalog  *Catalog
	Detector *Detector
	// Buffers of Wordings, reused from call to call.
	text, labels []byte
	spans        [][4]int // text start, end, label start, end
	words        []Wording
	msg          []byte
}

// NewExplainer loads the catalog and makes a Detector on /proc.
func NewExplainer() (*Explainer, error) {
	c, err := LoadCatalog()
	if err != nil {
		return nil, err
	}
	return &Explainer{Catalog: c, Detector: NewDetector()}, nil
}

// Explain fills x for ev. It does not allocate once the binary is cached.
func (e *Explainer) Explain(ev *decode.Event, x *Explanation) {
	x.Meaning = e.Catalog.Meaning(ev.Syscall, ev.Errno, ProtoOf(ev))
	x.Binary, x.Source, x.notAnalysed = nil, "", ""
	if b, source := e.Detector.lookup(ev); b != nil {
		if b.ok {
			x.Binary, x.Source = &b.info, source
		}
		x.notAnalysed = b.notAnalysed
	}
	x.Vars = MsgVars{Syscall: ev.Syscall, Errno: ev.Errno, PID: ev.PID, FD: ev.FD, Addrlen: 0}
	addr := &ev.Remote
	if ev.Syscall == decode.Bind {
		addr = &ev.Local
	}
	if addr.Valid {
		x.Vars.Family = addr.Family
		if addr.IP.IsValid() {
			x.Vars.IP, x.Vars.Port = addr.IP.Addr(), addr.IP.Port()
		}
	}
	x.Vars.Addrlen = ev.Addrlen
	n := copy(x.prog[:], baseName(argAt(ev.Args, 0)))
	x.Vars.Prog = x.prog[:n]
	x.Client, x.Program, x.msg = nil, nil, nil
	if x.Binary == nil {
		x.Expected = e.Catalog.ExpectedFailure(ev, "")
		return
	}
	x.Expected = e.Catalog.ExpectedFailure(ev, x.Binary.Runtime)
	x.Vars.Libc = x.Binary.Libc
	applet := ev.Comm
	if bytes.Equal(applet, []byte("busybox")) || bytes.Equal(applet, ev.ExeName) {
		applet = argAt(ev.Args, 1)
	}
	if p, ok := AppendProgram(x.program[:0], x.Binary.Runtime, ev.Args); ok {
		x.Program = p
	} else if x.Binary.GoPath != "" {
		x.Program = append(x.program[:0], x.Binary.GoPath[:min(len(x.Binary.GoPath), len(x.program))]...)
	}
	x.seen = Seen{Exe: ev.ExeName, Applet: applet, Program: x.Program, Argv0: argAt(ev.Args, 0)}
	x.Client = e.Catalog.Classify(x.Binary, &x.seen, ev.Errno)
	x.Vars.Applet = applet
	// The client's message for this failure, looked up once: none when
	// eaddr has none, or for an expected failure that nobody prints.
	if x.Client != nil && x.Expected == "" {
		x.msg = x.Client.Message(ev.Syscall, ev.Errno, ev.Args, ev.Async)
	}
}

// AppendClientMessage appends the line the client printed, or the part of
// it that the client and not its caller words; ok is false when eaddr
// does not know it. Confidence says how sure it is.
func (x *Explanation) AppendClientMessage(b []byte) ([]byte, bool) {
	m := x.msg
	if m == nil {
		return b, false
	}
	n := len(b)
	b, ok := Render(b, m.Text, &x.Vars)
	if !ok {
		return b[:n], false
	}
	return b, true
}

// Confidence is how sure AppendClientMessage's line is: ConfidenceExact,
// ConfidenceTemplate (parts shown <name> vary), or "" with no line.
func (x *Explanation) Confidence() string {
	m := x.msg
	switch {
	case m == nil:
		return ""
	case m.Confidence == ConfidenceExact && x.Vars.IP.IsUnspecified() && strings.Contains(m.Text, "{listen_addr}"):
		return ConfidenceTemplate // the wildcard is shown as given: <host>
	}
	return m.Confidence
}

// RetryNote returns what the client's retries mean for this failure, and
// the rule Attempts.Mark links them by: the client's own window (0: none,
// the caller's default applies, RetryWindowNs unless configured), the tries
// per line and whether they may come from any thread. With no client or no
// retries: "", no window of its own, no bound, the same thread.
func (x *Explanation) RetryNote() (note string, rule RetryRule) {
	if x.Client == nil {
		return "", rule
	}
	for i := range x.Client.Retries {
		r := &x.Client.Retries[i]
		if (r.errno != 0 && r.errno != x.Vars.Errno) || (r.Syscall != "" && r.Syscall != "*" && r.Syscall != x.Vars.Syscall.String()) {
			continue
		}
		if r.WindowMs > 0 {
			rule.WindowNs = uint64(r.WindowMs) * 1e6
		}
		rule.Max, rule.AnyThread = r.Max, r.AnyThread
		return r.Note, rule
	}
	return "", rule
}

// ClientUnknown says why no client is named (Client is nil): eaddr claims
// a printed line only for programs whose wording it knows.
func (x *Explanation) ClientUnknown() string {
	switch {
	case x.notAnalysed != "":
		return x.notAnalysed
	case x.Binary == nil:
		return "the program's binary could not be read, so what it printed is unknown: grep its logs for the errno text"
	}
	return "no catalogued wording for this program: each program words its failures its own way; grep its logs for the errno text"
}

// Grep appends to dst the errno texts to search logs for: the program's
// libc's (or Go's) strerror, or glibc's and musl's when its libc is
// unknown. The strings are the tables' own: nothing is allocated once dst
// has room.
func (x *Explanation) Grep(dst []string) []string {
	libcs := [...]Libc{x.Vars.Libc, ""}
	if x.Vars.Libc == LibcUnknown {
		libcs = [...]Libc{LibcGlibc, LibcMusl}
	}
	for _, libc := range libcs {
		if libc == LibcUnknown {
			continue
		}
		s, ok := Strerror(libc, x.Vars.Errno)
		if ok && (len(dst) == 0 || dst[len(dst)-1] != s) {
			dst = append(dst, s)
		}
	}
	return dst
}

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

// Wordings returns how the failure of x reads from every libc and every
// catalogued client, each distinct text once. The result and its bytes are
// reused by the next call: copy what you keep. It does not allocate once
// its buffers have grown.
func (e *Explainer) Wordings(x *Explanation) []Wording {
	ws := wordings{e: e, v: x.Vars}
	e.text, e.labels, e.spans = e.text[:0], e.labels[:0], e.spans[:0]
	for _, libc := range []Libc{LibcGlibc, LibcMusl, LibcGo} {
		if s, ok := Strerror(libc, x.Vars.Errno); ok {
			start, lstart := len(e.text), len(e.labels)
			e.text = append(e.text, s...)
			e.labels = append(append(e.labels, libc...), " strerror"...)
			ws.emit(start, lstart)
		}
	}
	rsys, rerrno, hasRelated := related(x.Vars.Syscall, x.Vars.Errno)
	for i := range e.Catalog.Clients {
		cl := &e.Catalog.Clients[i]
		for _, libc := range cl.Libcs {
			ws.try(cl, x.Vars.Syscall, x.Vars.Errno, libc, "")
			if hasRelated && bindsFirst(cl) {
				ws.try(cl, rsys, rerrno, libc, "binds before connect")
			}
		}
	}
	e.words = e.words[:0]
	for _, sp := range e.spans {
		e.words = append(e.words, Wording{By: e.labels[sp[2]:sp[3]], Text: e.text[sp[0]:sp[1]]})
	}
	return e.words
}

// wordings is the state of one Wordings call.
type wordings struct {
	e *Explainer
	v MsgVars
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
	tmpl, ok := cl.Template(sys, errno)
	if !ok {
		return
	}
	e := w.e
	w.v.Syscall, w.v.Errno, w.v.Libc, w.v.Prog, w.v.Applet = sys, errno, libc, cl.prog, cl.applet
	start, lstart := len(e.text), len(e.labels)
	e.text, ok = Render(e.text, tmpl, &w.v)
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

// bindsFirst: clients that can bind() before connect() and then fail in bind().
func bindsFirst(cl *Client) bool {
	switch cl.ID {
	case "busybox-nc", "openbsd-nc":
		return true
	}
	return false
}
