package output

import (
	"fmt"
	"io"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// WriteExplainText writes what `eaddr explain` says of r, for a person.
func WriteExplainText(w io.Writer, r *explain.Report) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if r.ID.Errno != 0 {
		p("errno:    %s (%d)\n", decode.ErrnoName(r.ID.Errno), r.ID.Errno)
	} else {
		p("errno:    not in the text: %s says only that connect() failed\n", r.ClientName)
	}
	if r.SysGuess {
		p("syscall:  %s (most likely; the text does not say)\n", r.Syscall)
	} else {
		p("syscall:  %s\n", r.Syscall)
	}
	if r.ID.Client != nil {
		p("wording:  %s", r.ID.Client.Name)
		if r.ID.Libc != "" {
			p(", with %s's strerror", r.ID.Libc)
		}
		p("\n          %s\n", r.ID.Client.Note)
		p("          source: %s\n", r.ID.Client.Source)
	} else {
		if r.ID.Libc != "" {
			p("wording:  %s's strerror text\n", r.ID.Libc)
		}
		p("client:   unknown: no catalogued program prints this line; only the errno was recognised\n")
	}
	for _, a := range r.Also {
		if a.Client != nil {
			p("          (the same words also come from %s)\n", a.Client.Name)
		}
	}
	if r.Meaning != nil {
		p("meaning:  %s\n", r.Meaning.Meaning)
	}
	if r.ID.Errno == 0 {
		p("meaning:  curl does not print the errno. For port exhaustion it is EADDRNOTAVAIL; run `curl -v` or `eaddr trace --errno all --comm curl` to see it.\n")
	}
	if len(r.Other) > 0 {
		p("\nthe same failure in other words (grep for these):\n")
		for _, o := range r.Other {
			p("  %-40s %s\n", o.By, o.Text)
		}
	}
	if r.Meaning != nil && len(r.Meaning.Causes) > 0 {
		p("\nlikely causes, most likely first:\n")
		for i, c := range r.Meaning.Causes {
			p("  %d. %s\n", i+1, c)
		}
	}
	p("\nconfirm on the node:\n")
	for _, c := range r.Confirm {
		p("  %s\n", c)
	}
}
