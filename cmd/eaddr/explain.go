package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/output"
)

// ExplainFlags are the flags of `eaddr explain`.
type ExplainFlags struct {
	Output string
	Full   bool
}

// SetFlags registers the flags on fs.
func (f *ExplainFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "text", "text for a person, json for a script")
	fs.BoolVar(&f.Full, "full", false, "text: also the errno's whole meaning, the notes on the client's words and where they come from, and the same failure as every other catalogued client and libc words it (JSON always has the other wordings)")
}

// explainHelp is eaddr explain --help.
var explainHelp = helpDoc{
	usage: `eaddr explain [flags] TEXT|ERRNO
       eaddr explain [flags] -          (reads stdin)
       COMMAND | eaddr explain [flags]  (no argument and stdin not a terminal: reads stdin)`,
	about: `Explain an error message offline (no root, no BPF): paste what a client printed, give an errno
(99, EADDRNOTAVAIL), or pipe a log. The answer comes first: the errno and what it means, which
client and libc printed the words, the likely causes, and commands that confirm the cause in the
pod's own network namespace, built only from what the text carries (an address or port it does not
name is never made up). Of a log, it explains the line that carries a failure eaddr is about, the
last such line, and says which lines it recognised. glibc's translations of the EADDRNOTAVAIL and
EADDRINUSE texts are recognised; for other translated text it says how to find the errno (LC_ALL=C,
strace, eaddr trace). Text it does not recognise exits 1 and lists the closest wordings it knows.
It reads at most 4 KiB (4096 bytes) of TEXT and 64 KiB (65536 bytes) of stdin, says so when it cut,
and echoes at most the first 80 bytes of a line back.`,
	examples: []example{
		{"a line a pod printed", `eaddr explain "wget: can't connect to remote host (1.1.1.1): Address not available"`},
		{"a pod's log", "kubectl logs -n shop web-7d9f8b6c5-x2x4q | eaddr explain"},
		{"an errno, and how every client words it", "eaddr explain --full EADDRINUSE"},
	},
	groups: []flagGroup{{"Flags", []string{"output", "full"}}},
	footer: "Exit status: 0 explained, 1 not recognised, 2 bad usage (no text, and stdin a terminal).",
}

func runExplain(_ context.Context, args []string, stdout, stderr io.Writer, _ *slog.Logger) error {
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	fs.Usage = func() { writeHelp(stdout, fs, explainHelp, helpWidth(stdout)) }
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
	in, err := readExplainInput(fs.Args(), os.Stdin)
	if err != nil {
		return err
	}
	ex, err := explain.NewExplainer()
	if err != nil {
		return err
	}
	reading := ex.Catalog.ReadText(in.text, in.cut)
	width := min(termWidth(stdout), output.DefaultWidth) // prose wider than 120 columns reads badly
	if reading.Line == 0 {
		return notRecognised(stdout, ex, &in, &reading, f.Output, width)
	}
	rep := ex.NewReport(reading.IDs)
	if f.Output == "json" {
		_, err := stdout.Write(append(output.AppendExplainResult(nil, explainResult(rep, &in, &reading)), '\n'))
		return err
	}
	output.WriteExplainInput(stdout, in.header(&reading), width)
	output.WriteExplainText(stdout, rep, output.ExplainText{Width: width, Full: f.Full})
	return nil
}

// notRecognised says so (exit 1), with the closest wordings eaddr knows.
func notRecognised(w io.Writer, ex *explain.Explainer, in *explainInput, r *explain.Reading, format string, width int) error {
	closest := ex.Catalog.Closest(in.text, 5)
	first, _, _ := strings.Cut(in.text, "\n") // trimmed: not empty
	echo, more := in.echo(strings.TrimSpace(first))
	if format == "json" {
		res := output.ExplainResult{Input: echo, InputBytes: in.total, InputCut: in.cut, InputLines: r.Lines, Closest: closest}
		w.Write(append(output.AppendExplainResult(nil, &res), '\n'))
		return errNotRecognised
	}
	output.WriteExplainInput(w, in.header(r), width)
	output.WriteExplainNotRecognised(w, echo, more, explain.LooksTranslated(in.text), closest, width)
	return errNotRecognised
}

// Bounds of what explain reads and echoes: an error message fits in 4 KiB,
// the lines of a log around a failure in 64 KiB, and matching more only
// costs time (each line is matched against every wording, about 0.2 ms).
const (
	maxExplainInput = 4096
	maxExplainStdin = 64 << 10
	maxExcerpt      = 80
)

// explainInput is the text explain works on, cut to its bound.
type explainInput struct {
	text  string
	total int  // bytes given, after trimming spaces (stdin: bytes read)
	limit int  // the most explain reads of it
	cut   bool // text is the first limit bytes of it
	stdin bool
}

// readExplainInput takes the text from the arguments, else from stdin: with
// "-", or with no argument when stdin is not a terminal (a pipe, a file).
func readExplainInput(args []string, stdin *os.File) (explainInput, error) {
	if len(args) == 1 && args[0] == "-" || len(args) == 0 && !term.IsTerminal(int(stdin.Fd())) {
		return readExplainStdin(stdin)
	}
	in := newExplainInput(strings.Join(args, " "), maxExplainInput)
	if in.text == "" {
		return in, usageErrorf("explain needs the text of an error message or an errno, e.g. eaddr explain EADDRNOTAVAIL, or a pipe: kubectl logs POD | eaddr explain")
	}
	return in, nil
}

// readExplainStdin reads at most maxExplainStdin bytes of stdin, and one
// more to know whether it went on.
func readExplainStdin(stdin io.Reader) (explainInput, error) {
	buf := make([]byte, maxExplainStdin+1)
	n, err := io.ReadFull(stdin, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return explainInput{}, fmt.Errorf("reading stdin: %w", err)
	}
	in := newExplainInput(string(buf[:n]), maxExplainStdin)
	in.stdin = true
	if in.text == "" {
		return in, usageErrorf("explain read nothing on stdin: give it the text of an error message, or the lines of a log")
	}
	return in, nil
}

func newExplainInput(s string, limit int) explainInput {
	s = strings.TrimSpace(s)
	in := explainInput{text: s, total: len(s), limit: limit}
	if len(s) > limit {
		in.text, in.cut = strings.TrimSpace(prefixUTF8(s, limit)), true
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

// echo is the start of s that explain echoes, and how many bytes it leaves
// out.
func (in *explainInput) echo(s string) (string, int) {
	e := prefixUTF8(s, maxExcerpt)
	return e, len(s) - len(e)
}

// header is what explain says of its input before the answer.
func (in *explainInput) header(r *explain.Reading) *output.ExplainInput {
	h := &output.ExplainInput{Stdin: in.stdin, Read: len(in.text), Limit: in.limit, Cut: in.cut,
		Lines: r.Lines, Line: r.Line, Recognised: r.Recognised}
	if !in.stdin {
		h.Given = in.total
	}
	h.Echo, h.EchoMore = in.echo(r.Text)
	return h
}

// errNotRecognised makes explain exit 1 with nothing more said.
var errNotRecognised = quietError{"not recognised"}

type quietError struct{ s string }

func (e quietError) Error() string { return e.s }

// explainResult is the report as output writes it.
func explainResult(r *explain.Report, in *explainInput, rd *explain.Reading) *output.ExplainResult {
	echo, _ := in.echo(rd.Text)
	res := &output.ExplainResult{Input: echo, InputBytes: in.total, InputCut: in.cut, Recognised: true,
		InputLines: rd.Lines, InputLine: rd.Line, RecognisedLines: rd.Recognised,
		Errno: r.ID.Errno, Syscall: r.Syscall, SyscallInferred: r.SysGuess, Libc: string(r.ID.Libc), Language: r.ID.Lang,
		Summary: r.Summary, Other: r.Other, Confirm: r.Confirm, Placeholders: r.Placeholders}
	if r.ID.Client != nil {
		res.Client, res.ClientSource = r.ID.Client.Name, r.ID.Client.Source
	}
	if r.Meaning != nil {
		res.Meaning, res.Causes = r.Meaning.Meaning, r.Meaning.Causes
	}
	return res
}
