package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// helpDoc is a command's --help, laid out as kubectl and ig lay theirs
// out: what it does, examples, then its flags in groups.
type helpDoc struct {
	usage    string      // "eaddr trace [flags]"
	about    string      // what the command does, a few lines
	examples []example   // shown before the flags
	groups   []flagGroup // every flag of the command in one of them
	footer   string      // exit status, links
}

type example struct{ what, cmd string }

// flagGroup is one heading of flags: filters, output, Kubernetes ...
type flagGroup struct {
	title string
	flags []string
}

// helpWidth is the column help text wraps at: the terminal's width when
// stdout is one (at most 120), else 100.
func helpWidth(stdout io.Writer) int {
	if t := stdoutTerminal(stdout); t != nil && t.Width() > 0 {
		return min(t.Width(), 120)
	}
	return 100
}

// writeHelp writes d for the flags of fs to w, wrapped at width.
func writeHelp(w io.Writer, fs *pflag.FlagSet, d helpDoc, width int) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n%s\n", d.usage, strings.TrimSpace(d.about))
	if len(d.examples) > 0 {
		b.WriteString("\nExamples:\n")
		for _, e := range d.examples {
			fmt.Fprintf(&b, "  # %s\n  %s\n\n", e.what, e.cmd)
		}
	} else {
		b.WriteString("\n")
	}
	for _, g := range d.groups {
		sub := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		sub.SortFlags = false
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil && !f.Hidden {
				sub.AddFlag(f)
			}
		}
		fmt.Fprintf(&b, "%s:\n%s\n", g.title, sub.FlagUsagesWrapped(width))
	}
	if d.footer != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(d.footer))
	}
	io.WriteString(w, b.String())
}

// ungrouped lists the flags of fs that no group of d shows: a help that
// leaves one out hides it (TestHelpGroupsEveryFlag).
func ungrouped(fs *pflag.FlagSet, d helpDoc) []string {
	in := map[string]bool{}
	for _, g := range d.groups {
		for _, n := range g.flags {
			in[n] = true
		}
	}
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !in[f.Name] && !f.Hidden && f.Name != "help" {
			out = append(out, f.Name)
		}
	})
	return out
}
