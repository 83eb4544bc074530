package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/output"
)

// ExplainFlags are the flags of `eaddr explain`.
type ExplainFlags struct {
	Output string
}

// SetFlags registers the flags on fs.
func (f *ExplainFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "text", "text for a person, json for a script")
}

func runExplain(_ context.Context, args []string, stdout, stderr io.Writer, _ *slog.Logger) error {
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: eaddr explain [flags] TEXT|ERRNO

Explain an error message offline (no root, no BPF): paste what a client printed,
e.g. "wget: can't connect to remote host (1.1.1.1): Address not available", or
give an errno (99, EADDRNOTAVAIL). eaddr says which errno it is, which syscall most
likely failed, which client and libc the words come from, how other clients word
the same failure, the likely causes and the commands that confirm them on the node.
Text it does not recognise exits 1 and lists the closest wordings it knows.
explain reads at most the first 4 KiB (4096 bytes) of TEXT, says so when it cut
it, and echoes at most the first 80 bytes of it back.

Flags:
%s`, fs.FlagUsages())
	}
	var f ExplainFlags
	f.SetFlags(fs)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	if f.Output != "text" && f.Output != "json" {
		return usageErrorf("--output must be text or json, not %q", f.Output)
	}
	in := newExplainInput(strings.Join(fs.Args(), " "))
	if in.text == "" {
		return usageErrorf("explain needs the text of an error message or an errno, e.g. eaddr explain EADDRNOTAVAIL")
	}
	input := in.text
	ex, err := explain.NewExplainer()
	if err != nil {
		return err
	}
	ids := ex.Catalog.Identify(input)
	if len(ids) == 0 {
		closest := ex.Catalog.Closest(input, 5)
		if f.Output == "json" {
			res := output.ExplainResult{Input: in.excerpt(), InputBytes: in.total, InputCut: in.cut, Closest: closest}
			stdout.Write(append(output.AppendExplainResult(nil, &res), '\n'))
		} else {
			in.writeText(stdout)
			fmt.Fprintf(stdout, "not recognised: %s\n", in.quoted())
			if len(closest) > 0 {
				fmt.Fprintln(stdout, "closest wordings eaddr knows:")
				for _, w := range closest {
					fmt.Fprintf(stdout, "  %-32s %s\n", w.By, w.Text)
				}
			}
		}
		return errNotRecognised
	}
	rep := buildReport(ex, input, ids)
	rep.in = in
	if f.Output == "json" {
		_, err := stdout.Write(append(output.AppendExplainResult(nil, rep.result()), '\n'))
		return err
	}
	in.writeText(stdout)
	rep.writeText(stdout)
	return nil
}

// Bounds of what explain reads and echoes: an error message fits in 4 KiB,
// and matching more only costs time (the closest-wording search grows with
// the number of words).
const (
	maxExplainInput = 4096
	maxExcerpt      = 80
)

// explainInput is the text explain works on, cut to maxExplainInput bytes.
type explainInput struct {
	text  string
	total int  // bytes given, after trimming spaces
	cut   bool // text is the first maxExplainInput bytes of them
}

func newExplainInput(s string) explainInput {
	s = strings.TrimSpace(s)
	in := explainInput{text: s, total: len(s)}
	if len(s) > maxExplainInput {
		in.text, in.cut = strings.TrimSpace(prefixUTF8(s, maxExplainInput)), true
	}
	return in
}

// prefixUTF8 is at most n bytes of s, not ending inside a UTF-8 sequence.
func prefixUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n]
}

// excerpt is the start of the input that explain echoes.
func (in explainInput) excerpt() string { return prefixUTF8(in.text, maxExcerpt) }

// quoted is the excerpt for a person: Go-quoted, with how much was left out.
func (in explainInput) quoted() string {
	e := in.excerpt()
	if len(e) == in.total {
		return strconv.Quote(e)
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.Quote(e), in.total-len(e))
}

func (in explainInput) writeText(w io.Writer) {
	if in.cut {
		fmt.Fprintf(w, "input:    %d bytes, cut to the first %d: explain reads at most 4 KiB\n", in.total, len(in.text))
	}
}

// errNotRecognised makes explain exit 1 with nothing more said.
var errNotRecognised = quietError{"not recognised"}

type quietError struct{ s string }

func (e quietError) Error() string { return e.s }

// report is everything explain says about one input.
type report struct {
	input    string
	in       explainInput
	id       explain.Identification
	also     []explain.Identification // other readings of the same text
	syscall  decode.Syscall
	sysGuess bool // syscall inferred, not read from the text
	meaning  *explain.ErrnoInfo
	other    []explain.Wording
	addr     string // ip:port for the commands
}

func buildReport(ex *explain.Explainer, input string, ids []explain.Identification) *report {
	r := &report{input: input, id: ids[0], also: ids[1:]}
	r.syscall = r.id.Syscall
	if r.syscall == 0 {
		// Port exhaustion shows as EADDRNOTAVAIL in connect() and as
		// EADDRINUSE in a bind() before connect.
		r.sysGuess = true
		r.syscall = decode.Connect
		if r.id.Errno == decode.EADDRINUSE {
			r.syscall = decode.Bind
		}
	}
	if r.id.Errno != 0 {
		r.meaning = ex.Catalog.Meaning(r.syscall, r.id.Errno)
	}
	ip, port := r.id.IP, r.id.Port
	if !ip.IsValid() {
		ip = netip.MustParseAddr("10.96.0.10")
	}
	if port == 0 {
		port = 80
	}
	r.addr = netip.AddrPortFrom(ip, port).String()
	if r.id.Errno != 0 {
		x := explain.Explanation{Vars: explain.MsgVars{Syscall: r.syscall, Errno: r.id.Errno, IP: ip, Port: port, PID: 1, FD: 3, Family: decode.AFInet, Addrlen: 16}}
		if ip.Is6() {
			x.Vars.Family, x.Vars.Addrlen = decode.AFInet6, 28
		}
		for _, w := range ex.Wordings(&x) {
			r.other = append(r.other, explain.Wording{By: append([]byte(nil), w.By...), Text: append([]byte(nil), w.Text...)})
		}
	}
	return r
}

func (r *report) clientName() string {
	if r.id.Client == nil {
		return ""
	}
	return r.id.Client.Name
}

func (r *report) writeText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if r.id.Errno != 0 {
		p("errno:    %s (%d)\n", decode.ErrnoName(r.id.Errno), r.id.Errno)
	} else {
		p("errno:    not in the text: %s says only that connect() failed\n", r.clientName())
	}
	if r.sysGuess {
		p("syscall:  %s (most likely; the text does not say)\n", r.syscall)
	} else {
		p("syscall:  %s\n", r.syscall)
	}
	if r.id.Client != nil {
		p("wording:  %s", r.id.Client.Name)
		if r.id.Libc != "" {
			p(", with %s's strerror", r.id.Libc)
		}
		p("\n          %s\n", r.id.Client.Note)
		p("          source: %s\n", r.id.Client.Source)
	} else if r.id.Libc != "" {
		p("wording:  %s's strerror text\n", r.id.Libc)
	}
	for _, a := range r.also {
		if a.Client != nil {
			p("          (the same words also come from %s)\n", a.Client.Name)
		}
	}
	if r.meaning != nil {
		p("meaning:  %s\n", r.meaning.Meaning)
	}
	if r.id.Errno == 0 {
		p("meaning:  curl does not print the errno. For port exhaustion it is EADDRNOTAVAIL; run `curl -v` or `eaddr trace --errno all --comm curl` to see it.\n")
	}
	if len(r.other) > 0 {
		p("\nthe same failure in other words (grep for these):\n")
		for _, o := range r.other {
			p("  %-40s %s\n", o.By, o.Text)
		}
	}
	if r.meaning != nil && len(r.meaning.Causes) > 0 {
		p("\nlikely causes, most likely first:\n")
		for i, c := range r.meaning.Causes {
			p("  %d. %s\n", i+1, c)
		}
	}
	p("\nconfirm on the node:\n")
	for _, c := range r.confirm() {
		p("  %s\n", c)
	}
}

func (r *report) confirm() []string {
	var out []string
	if r.meaning != nil {
		for _, c := range r.meaning.Confirm {
			out = append(out, strings.ReplaceAll(c, "{addr}", r.addr))
		}
	}
	if len(out) == 0 {
		errno := "all"
		if r.id.Errno != 0 {
			errno = decode.ErrnoName(r.id.Errno)
		}
		out = append(out, "eaddr trace --errno "+errno)
	}
	return out
}

// result is the report as output writes it.
func (r *report) result() *output.ExplainResult {
	res := &output.ExplainResult{Input: r.in.excerpt(), InputBytes: r.in.total, InputCut: r.in.cut, Recognised: true,
		Errno: r.id.Errno, Syscall: r.syscall, SyscallInferred: r.sysGuess, Libc: string(r.id.Libc),
		Other: r.other, Confirm: r.confirm()}
	if r.id.Client != nil {
		res.Client, res.ClientSource = r.id.Client.Name, r.id.Client.Source
	}
	if r.meaning != nil {
		res.Meaning, res.Causes = r.meaning.Meaning, r.meaning.Causes
	}
	return res
}
