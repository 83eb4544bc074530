package explain

import (
	"bytes"

	"github.com/eaddr/eaddr/decode"
)

// Explanation is what eaddr can say about one event: what the errno means
// for that syscall, how the process renders errnos, which client it is,
// the line it most likely printed and how others word the same failure.
// Explain leaves it finished: its fields are written as they are. Its
// buffers are reused by the next Explain into it: copy what you keep.
type Explanation struct {
	Meaning *ErrnoInfo // nil when the catalog does not know the errno
	// Expected says why this failure is one programs cause on purpose
	// (catalog "expected"): "" for a real one.
	Expected string
	Binary   *BinaryInfo // nil when the binary could not be analysed
	Source   string      // how the binary was found: exe, path or cache
	Client   *Client     // nil when no catalog entry matches
	vars     msgVars
	// Program is what an interpreter runs ("-m http.server", "app.js",
	// "-jar app.jar") or a Go program's main package; empty when unknown
	// or not an interpreter.
	Program []byte

	// ClientMessage is the line the client printed, or the part of it
	// that the client and not its caller words; HasClientMessage is false
	// when eaddr does not know it (no client, no wording, or a part of it
	// that no event tells).
	ClientMessage    []byte
	HasClientMessage bool
	// Confidence is how sure ClientMessage is: confidenceExact,
	// ConfidenceTemplate (the parts shown <name> vary), or "" with none.
	Confidence string
	// ClientUnknown says why no client is named (Client is nil): eaddr
	// claims a printed line only for programs whose wording it knows.
	// "" when Client is set.
	ClientUnknown string
	// Retries is what the client's retries mean for this failure ("":
	// no client, or no retries); RetryRule is how Attempts.Mark links
	// them: the client's own window (0: none, the caller's default
	// applies, RetryWindowNs unless configured), the tries per line and
	// whether they may come from any thread.
	Retries   string
	RetryRule RetryRule
	// Grep are the errno texts to search logs for: the program's libc's
	// (or Go's) strerror, or glibc's and musl's when its libc is unknown.
	Grep []string
	// Full: Explain was asked for OtherWordings, how the failure reads
	// from every libc and every catalogued client, each distinct text
	// once. Empty when not Full.
	Full          bool
	OtherWordings []Wording

	msg *message // the client's message for this failure (Explain)
	// notAnalysed is why the binary was not analysed when it was past
	// binLimits ("" otherwise).
	notAnalysed string
	seen        seenAs
	prog        [64]byte
	program     [96]byte
	msgBuf      []byte
	grep        [2]string
	words       wordingBufs
}

// Explainer fills Explanations. Not safe for concurrent use.
type Explainer struct {
	Catalog  *Catalog
	Detector *Detector
}

// NewExplainer loads the catalog and makes a Detector on /proc.
func NewExplainer() (*Explainer, error) {
	c, err := loadCatalog()
	if err != nil {
		return nil, err
	}
	return &Explainer{Catalog: c, Detector: newDetector()}, nil
}

// Explain fills x for ev, finished, and with wordings (--explain full)
// its OtherWordings too. It does not allocate once the binary is cached
// and x's buffers have grown.
func (e *Explainer) Explain(ev *decode.Event, x *Explanation, wordings bool) {
	e.identify(ev, x, "")
	x.finish(e.Catalog, wordings)
}

// ExplainPending is Explain for an event whose binary is not to be looked
// for (its analysis is not done, or was refused): x names no client, and
// its ClientUnknown is why, a sentence of NotAnalysed.
func (e *Explainer) ExplainPending(ev *decode.Event, x *Explanation, wordings bool, why string) {
	e.identify(ev, x, why)
	x.finish(e.Catalog, wordings)
}

// identify fills what x says of ev's program: the meaning of its failure,
// its binary, its client and the client's message template. With why set,
// the binary is not looked up: why says why it is not known.
func (e *Explainer) identify(ev *decode.Event, x *Explanation, why string) {
	x.Meaning = e.Catalog.meaningOf(ev.Syscall, ev.Errno, protoOf(ev))
	x.Binary, x.Source, x.notAnalysed = nil, "", why
	if why == "" {
		if b, source := e.Detector.lookup(ev); b != nil {
			if b.ok {
				x.Binary, x.Source = &b.info, source
			}
			x.notAnalysed = b.notAnalysed
		}
	}
	x.vars = msgVars{Syscall: ev.Syscall, Errno: ev.Errno, PID: ev.PID, FD: ev.FD, Addrlen: 0}
	addr := &ev.Remote
	if ev.Syscall == decode.Bind {
		addr = &ev.Local
	}
	if addr.Valid {
		x.vars.Family = addr.Family
		if addr.IP.IsValid() {
			x.vars.IP, x.vars.Port = addr.IP.Addr(), addr.IP.Port()
		}
	}
	x.vars.Addrlen = ev.Addrlen
	n := copy(x.prog[:], baseName(argAt(ev.Args, 0)))
	x.vars.Prog = x.prog[:n]
	x.Client, x.Program, x.msg = nil, nil, nil
	if x.Binary == nil {
		x.Expected = e.Catalog.expectedFailure(ev, "")
		return
	}
	x.Expected = e.Catalog.expectedFailure(ev, x.Binary.Runtime)
	x.vars.Libc = x.Binary.Libc
	applet := ev.Comm
	if bytes.Equal(applet, []byte("busybox")) || bytes.Equal(applet, ev.ExeName) {
		applet = argAt(ev.Args, 1)
	}
	if p, ok := appendProgram(x.program[:0], x.Binary.Runtime, ev.Args); ok {
		x.Program = p
	} else if x.Binary.GoPath != "" {
		x.Program = append(x.program[:0], x.Binary.GoPath[:min(len(x.Binary.GoPath), len(x.program))]...)
	}
	x.seen = seenAs{Exe: ev.ExeName, Applet: applet, Program: x.Program, Argv0: argAt(ev.Args, 0)}
	x.Client = e.Catalog.clientOf(x.Binary, &x.seen, ev.Errno)
	x.vars.Applet = applet
	// The client's message for this failure, looked up once: none when
	// eaddr has none, or for an expected failure that nobody prints.
	if x.Client != nil && x.Expected == "" {
		x.msg = x.Client.printed(ev.Syscall, ev.Errno, ev.Args, ev.Async)
	}
}
