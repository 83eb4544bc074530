package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

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
	rep := ex.NewReport(ids)
	if f.Output == "json" {
		_, err := stdout.Write(append(output.AppendExplainResult(nil, explainResult(rep, in)), '\n'))
		return err
	}
	in.writeText(stdout)
	output.WriteExplainText(stdout, rep)
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

// explainResult is the report as output writes it.
func explainResult(r *explain.Report, in explainInput) *output.ExplainResult {
	res := &output.ExplainResult{Input: in.excerpt(), InputBytes: in.total, InputCut: in.cut, Recognised: true,
		Errno: r.ID.Errno, Syscall: r.Syscall, SyscallInferred: r.SysGuess, Libc: string(r.ID.Libc),
		Other: r.Other, Confirm: r.Confirm}
	if r.ID.Client != nil {
		res.Client, res.ClientSource = r.ID.Client.Name, r.ID.Client.Source
	}
	if r.Meaning != nil {
		res.Meaning, res.Causes = r.Meaning.Meaning, r.Meaning.Causes
	}
	return res
}
