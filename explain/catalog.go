package explain

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/eaddr/eaddr/decode"
)

// catalogJSON says, per client and runtime, how it is recognised, what it
// prints for a failed connect() or bind(), and where that text comes from;
// and per errno what it means and how to confirm the cause.
//
//go:embed catalog.json
var catalogJSON []byte

// Catalog is the parsed catalog.json.
type Catalog struct {
	Errnos []ErrnoInfo `json:"errnos"`
	// UnknownErrno is what explain says of a text that does not carry the
	// errno (curl's "Couldn't connect to server"): how to find it.
	UnknownErrno ErrnoInfo  `json:"unknown_errno"`
	Clients      []Client   `json:"clients"`
	Expected     []expected `json:"expected"`
}

// expected is a failure that programs cause on purpose and nobody prints:
// a probe for an optional service, such as glibc asking nscd first on
// every name lookup. Matched on a unix socket's path and the errno.
type expected struct {
	Syscall string   `json:"syscall"`
	Paths   []string `json:"paths"`
	// Addrs (ip:port) with Runtime: an inet address one runtime's library
	// probes, e.g. urllib3 binding [::1]:0 to learn whether IPv6 works.
	Addrs   []string `json:"addrs"`
	Runtime string   `json:"runtime"`
	addrs   []netip.AddrPort
	Errnos  []string `json:"errnos"`
	Why     string   `json:"why"`
	Source  string   `json:"source"`
	errnos  []int
}

// ErrnoInfo explains one errno for one syscall ("*": either) and one
// protocol (Proto: protoTCP, protoUDP, protoUnix; "*" or empty: any other,
// and an unknown one).
type ErrnoInfo struct {
	Errno   string `json:"errno"`
	Syscall string `json:"syscall"`
	Proto   string `json:"proto"`
	Meaning string `json:"meaning"`
	// Short is Meaning in one sentence, for explain's first line; "" when
	// Meaning is short already.
	Short   string   `json:"short"`
	Causes  []string `json:"causes"`
	Confirm []Check  `json:"confirm"`
	num     int
}

// Check is a command that confirms a cause. Run and Why may hold {ss_dst},
// {dst}, {ip}, {port} and {errno}, which explain fills only from what the
// pasted text carries (confirm.go); words in capitals (PID, PATH, NAME) are
// the operator's to fill.
type Check struct {
	// In: where it runs. checkInNetns: in the failing process's network
	// namespace (nsenter); checkInEaddr: an eaddr command (on the node, or
	// in a node debug pod); "": as written.
	In  string `json:"in"`
	Run string `json:"run"`
	Why string `json:"why"`
}

// Where a Check runs.
const (
	checkInNetns = "netns"
	checkInEaddr = "eaddr"
)

// Client is one program or runtime and its wording.
type Client struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Match    match     `json:"match"`
	Libcs    []Libc    `json:"libcs"`
	Order    string    `json:"order"`
	Messages []message `json:"messages"`
	Note     string    `json:"note"`
	Source   string    `json:"source"`
	// Retries: the client makes several failing calls per printed line
	// (per syscall and errno).
	Retries []retries `json:"retries"`
	// Prog is the program name its messages start with, when they do;
	// default: the first exe or applet name, else the id.
	Prog   string `json:"prog"`
	prog   []byte
	applet []byte // the first applet matched: its name where wordings show one
}

// match says how a client is recognised from its binary: by executable
// file name, busybox applet, runtime (BinaryInfo.Runtime), and optionally
// only for some errnos.
type match struct {
	Exe     []string `json:"exe"`
	Applet  []string `json:"applet"`
	Runtime []string `json:"runtime"`
	// Needed: a native program that links a library whose name starts
	// with one of these (DT_NEEDED), e.g. "libcurl".
	Needed []string `json:"needed"`
	// Argv0: a native program started as one of these ("dir/*": any in
	// dir), e.g. the helpers apt runs from /usr/lib/apt/methods/.
	Argv0 []string `json:"argv0"`
	// Program: with Runtime, only when the interpreter runs this program
	// (appendProgram: "-m pip", "app.js", "-jar app.jar", "com.example.Main").
	Program []string `json:"program"`
	Errno   []string `json:"errno"`
	errnos  []int
}

// retries says how many failing calls make one printed line: at most Max
// (0: not bounded), each within WindowMs of the previous (0: the default,
// RetryWindowNs), and Note says so in words.
type retries struct {
	Max      int    `json:"max"`
	WindowMs int    `json:"window_ms"`
	Syscall  string `json:"syscall"` // "" or "*": either
	Errno    string `json:"errno"`   // "" or "*": every errno
	Note     string `json:"note"`
	// AnyThread: the tries may come from any thread of the process (Go's
	// goroutines move between threads), not only the first try's.
	AnyThread bool `json:"any_thread"`
	errno     int
}

// message is a template for one syscall and errno ("*": any).
type message struct {
	Syscall string   `json:"syscall"`
	Errno   string   `json:"errno"`
	Text    string   `json:"text"`
	Also    []string `json:"also"` // other versions' wordings: recognised, never predicted
	// Flag, NoFlag: the message applies only when the program was (not)
	// given this short option, e.g. "v" for -v or -zv (hasFlag).
	Flag   string `json:"flag"`
	NoFlag string `json:"no_flag"`
	// Async: when set, the message applies only to a connect that failed
	// after returning EINPROGRESS (true) or only to one that failed in the
	// call (false): Node words the two differently.
	Async *bool `json:"async"`
	// RecogniseOnly: `eaddr explain` recognises the text, but it is never
	// predicted: the client may print it or something else.
	RecogniseOnly bool `json:"recognise_only"`
	errno         int  // parsed Errno; 0 for "*"
	// Confidence is confidenceExact when eaddr fills every part of Text
	// from the event, ConfidenceTemplate when some part is unknowable
	// (curl's elapsed ms, a host name as typed): those are shown <name>.
	Confidence string `json:"-"`
}

// Confidence of a predicted line.
const (
	confidenceExact    = "exact"
	ConfidenceTemplate = "template"
)

// unknowable are the placeholders eaddr cannot fill from an event; they
// render as <name> and make a message a template.
var unknowable = []string{"ms", "host", "ptr", "timestamp", "service", "rest"}

func confidenceOf(text string) string {
	for _, u := range unknowable {
		if strings.Contains(text, "{"+u+"}") {
			return ConfidenceTemplate
		}
	}
	return confidenceExact
}

var (
	catalogOnce sync.Once
	catalog     *Catalog
	catalogErr  error
)

// loadCatalog parses the embedded catalog once. It only fails if the
// embedded file is broken, which TestCatalogValid catches.
func loadCatalog() (*Catalog, error) {
	catalogOnce.Do(func() {
		var c Catalog
		if err := json.Unmarshal(catalogJSON, &c); err != nil {
			catalogErr = fmt.Errorf("explain/catalog.json: %w", err)
			return
		}
		if err := c.prepare(); err != nil {
			catalogErr = fmt.Errorf("explain/catalog.json: %w", err)
			return
		}
		catalog = &c
	})
	return catalog, catalogErr
}

// prepare parses what the JSON holds as text: errno names, addresses.
func (c *Catalog) prepare() error {
	var err error
	for i := range c.Errnos {
		if c.Errnos[i].num, err = decode.ParseErrno(c.Errnos[i].Errno); err != nil {
			return fmt.Errorf("errnos[%d]: %w", i, err)
		}
		if err := checkChecks(c.Errnos[i].Confirm); err != nil {
			return fmt.Errorf("errnos[%d]: %w", i, err)
		}
	}
	if err := checkChecks(c.UnknownErrno.Confirm); err != nil {
		return fmt.Errorf("unknown_errno: %w", err)
	}
	for i := range c.Clients {
		if err := c.Clients[i].prepare(); err != nil {
			return fmt.Errorf("client %s: %w", c.Clients[i].ID, err)
		}
	}
	for i := range c.Expected {
		e := &c.Expected[i]
		if e.errnos, err = parseErrnos(e.Errnos); err != nil {
			return fmt.Errorf("expected[%d]: %w", i, err)
		}
		for _, a := range e.Addrs {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				return fmt.Errorf("expected[%d]: %w", i, err)
			}
			e.addrs = append(e.addrs, ap)
		}
	}
	return nil
}

func (cl *Client) prepare() error {
	switch {
	case cl.Prog != "":
	case len(cl.Match.Exe) > 0:
		cl.Prog = cl.Match.Exe[0]
	case len(cl.Match.Applet) > 0:
		cl.Prog = cl.Match.Applet[0]
	default:
		cl.Prog = cl.ID
	}
	cl.prog = []byte(cl.Prog)
	if len(cl.Match.Applet) > 0 {
		cl.applet = []byte(cl.Match.Applet[0])
	}
	var err error
	for j := range cl.Retries {
		if cl.Retries[j].errno, err = parseErrnoOrAny(cl.Retries[j].Errno); err != nil {
			return fmt.Errorf("retries: %w", err)
		}
	}
	if cl.Match.errnos, err = parseErrnos(cl.Match.Errno); err != nil {
		return err
	}
	for j := range cl.Messages {
		m := &cl.Messages[j]
		m.Confidence = confidenceOf(m.Text)
		if m.errno, err = parseErrnoOrAny(m.Errno); err != nil {
			return err
		}
	}
	return nil
}

// checkChecks refuses a Check that runs nowhere known.
func checkChecks(list []Check) error {
	for _, ch := range list {
		switch ch.In {
		case "", checkInNetns, checkInEaddr:
		default:
			return fmt.Errorf("confirm %q: in %q is none of \"\", %q, %q", ch.Run, ch.In, checkInNetns, checkInEaddr)
		}
		if ch.Run == "" || ch.Why == "" {
			return fmt.Errorf("confirm %q: run and why are both needed", ch.Run)
		}
	}
	return nil
}

// parseErrnoOrAny parses an errno name; "" and "*" (any) are 0.
func parseErrnoOrAny(s string) (int, error) {
	if s == "" || s == "*" {
		return 0, nil
	}
	return decode.ParseErrno(s)
}

func parseErrnos(names []string) ([]int, error) {
	var out []int
	for _, name := range names {
		n, err := decode.ParseErrno(name)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// meaningOf returns what errno means for syscall and proto (protoOf; ""
// when unknown), or nil when the catalog does not know it. An entry of the
// syscall wins over one for either syscall, then one of the protocol over
// one for any: an unknown protocol gets only an entry for any, which says
// what the errno means for each.
func (c *Catalog) meaningOf(sys decode.Syscall, errno int, proto string) *ErrnoInfo {
	var best *ErrnoInfo
	bestRank := 0
	for i := range c.Errnos {
		e := &c.Errnos[i]
		if e.num != errno {
			continue
		}
		rank := 0
		switch e.Syscall {
		case sys.String():
			rank = 2
		case "*":
		default:
			continue
		}
		switch e.Proto {
		case "", "*":
			rank++
		case proto:
			rank += 2
		default:
			continue
		}
		if rank > bestRank {
			best, bestRank = e, rank
		}
	}
	return best
}

// expectedFailure returns why ev is a failure programs cause on purpose
// (a probe nobody prints), or "". runtime is the program's
// (BinaryInfo.Runtime), "" when unknown.
func (c *Catalog) expectedFailure(ev *decode.Event, runtime string) string {
	addr := &ev.Remote
	if ev.Syscall == decode.Bind {
		addr = &ev.Local
	}
	for i := range c.Expected {
		e := &c.Expected[i]
		if e.Syscall != ev.Syscall.String() || !containsInt(e.errnos, ev.Errno) {
			continue
		}
		switch {
		case len(addr.Path) > 0 && containsBytes(e.Paths, addr.Path):
			return e.Why
		case addr.IP.IsValid() && e.Runtime != "" && e.Runtime == runtime:
			for _, a := range e.addrs {
				if a == addr.IP {
					return e.Why
				}
			}
		}
	}
	return ""
}

// seenAs is what identifies a failing process besides its binary's analysis.
type seenAs struct {
	Exe     []byte // the executable's file name
	Applet  []byte // busybox applet: comm, or argv[1] of `busybox APPLET`
	Program []byte // what an interpreter runs (appendProgram)
	Argv0   []byte // argv[0] as the program was started
}

// clientOf picks the client for a failing process from its binary's
// analysis and what else is seen of it. The first entry that matches wins,
// so specific entries stand before generic ones in catalog.json. nil when
// none matches.
func (c *Catalog) clientOf(bin *BinaryInfo, seen *seenAs, errno int) *Client {
	for i := range c.Clients {
		cl := &c.Clients[i]
		if cl.matches(bin, seen, errno) {
			return cl
		}
	}
	return nil
}

func (cl *Client) matches(bin *BinaryInfo, seen *seenAs, errno int) bool {
	m := &cl.Match
	if len(m.errnos) > 0 && !containsInt(m.errnos, errno) {
		return false
	}
	switch {
	case len(m.Applet) > 0:
		return bin.Runtime == runtimeBusyBox && containsBytes(m.Applet, seen.Applet)
	case len(m.Argv0) > 0:
		return bin.Runtime == runtimeC && matchesProgram(m.Argv0, seen.Argv0)
	case len(m.Exe) > 0:
		return bin.Runtime != runtimeBusyBox && bin.Runtime != runtimeGo && containsBytes(m.Exe, seen.Exe)
	case len(m.Needed) > 0:
		return bin.Runtime == runtimeC && linksAny(bin.Needed, m.Needed)
	case len(m.Runtime) > 0:
		if !contains(m.Runtime, bin.Runtime) {
			return false
		}
		return len(m.Program) == 0 || matchesProgram(m.Program, seen.Program)
	}
	return false
}

// matchesProgram: program is one of list, where "x*" stands for every
// program starting with x.
func matchesProgram(list []string, program []byte) bool {
	for _, p := range list {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(string(program), pre) { // no allocation: compared only
				return true
			}
		} else if p == string(program) {
			return true
		}
	}
	return false
}

// linksAny: one of the libraries needed starts with one of the prefixes.
func linksAny(needed, prefixes []string) bool {
	for _, n := range needed {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsBytes(list []string, b []byte) bool {
	for _, x := range list {
		if x == string(b) { // no allocation: the conversion is only compared
			return true
		}
	}
	return false
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// template returns the client's message template for syscall and errno,
// preferring an exact errno over "*".
func (cl *Client) template(sys decode.Syscall, errno int) (string, bool) {
	if m := cl.messageFor(sys, errno, nil, false, false); m != nil {
		return m.Text, true
	}
	return "", false
}

// printed returns the message the client prints for syscall and errno,
// preferring an exact errno over "*"; nil when eaddr does not know it.
// args (argv, NUL-separated) decide the messages that depend on an option:
// with none, only those that do not.
func (cl *Client) printed(sys decode.Syscall, errno int, args []byte, async bool) *message {
	return cl.messageFor(sys, errno, args, async, true)
}

// messageFor is printed; without predict, a wording of the client for
// sys and errno whatever the options (for the lists of wordings).
func (cl *Client) messageFor(sys decode.Syscall, errno int, args []byte, async, predict bool) *message {
	var best *message
	for i := range cl.Messages {
		m := &cl.Messages[i]
		if m.Syscall != "*" && m.Syscall != sys.String() {
			continue
		}
		if predict && (m.RecogniseOnly || (m.Async != nil && *m.Async != async) || (m.Flag != "" && !hasFlag(args, m.Flag[0])) ||
			(m.NoFlag != "" && (len(args) == 0 || hasFlag(args, m.NoFlag[0])))) {
			continue
		}
		if m.Errno == "*" {
			if best == nil {
				best = m
			}
			continue
		}
		if m.errno == errno {
			return m
		}
	}
	return best
}

// hasFlag reports whether argv (NUL-separated, argv[0] first) has the
// short option c alone or among others ("-v", "-zv"), before a "--".
func hasFlag(args []byte, c byte) bool {
	first := true
	for len(args) > 0 {
		a := args
		if i := indexByte(args, 0); i >= 0 {
			a, args = args[:i], args[i+1:]
		} else {
			args = nil
		}
		if first {
			first = false
			continue
		}
		if len(a) == 2 && a[0] == '-' && a[1] == '-' {
			return false
		}
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			continue
		}
		for _, b := range a[1:] {
			if b == c {
				return true
			}
		}
	}
	return false
}
