package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every flag of a command is in one group of its help, and the help is on
// stdout, within 120 columns, with examples: `eaddr trace --help | grep
// errno` finds the flag.
func TestHelpGroupsEveryFlag(t *testing.T) {
	for name, c := range map[string]struct {
		doc   helpDoc
		flags func(*pflag.FlagSet)
	}{
		"trace":   {traceHelp, func(fs *pflag.FlagSet) { new(TraceFlags).SetFlags(fs) }},
		"demo":    {demoHelp, func(fs *pflag.FlagSet) { new(DemoFlags).SetFlags(fs) }},
		"check":   {checkHelp, func(fs *pflag.FlagSet) { new(CheckFlags).SetFlags(fs) }},
		"top":     {topHelp, func(fs *pflag.FlagSet) { new(TopFlags).SetFlags(fs) }},
		"explain": {explainHelp, func(fs *pflag.FlagSet) { new(ExplainFlags).SetFlags(fs) }},
	} {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		c.flags(fs)
		if left := ungrouped(fs, c.doc); len(left) > 0 {
			t.Errorf("eaddr %s --help shows no group with %v", name, left)
		}
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), []string{name, "--help"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
			t.Errorf("eaddr %s --help: exit %d, stderr %q", name, code, errOut.String())
		}
		for i, l := range strings.Split(out.String(), "\n") {
			if len([]rune(l)) > 120 {
				t.Errorf("eaddr %s --help line %d is %d columns: %q", name, i+1, len([]rune(l)), l)
			}
		}
		if !strings.Contains(out.String(), "\nExamples:\n") {
			t.Errorf("eaddr %s --help has no examples", name)
		}
	}
}

// The same flag means the same in every command: its default and, for the
// netns, host and output flags, the values it takes.
func TestSameFlagSameMeaning(t *testing.T) {
	sets := map[string]*pflag.FlagSet{}
	for name, set := range map[string]func(*pflag.FlagSet){
		"trace": func(fs *pflag.FlagSet) { new(TraceFlags).SetFlags(fs) },
		"check": func(fs *pflag.FlagSet) { new(CheckFlags).SetFlags(fs) },
		"top":   func(fs *pflag.FlagSet) { new(TopFlags).SetFlags(fs) },
	} {
		sets[name] = pflag.NewFlagSet(name, pflag.ContinueOnError)
		set(sets[name])
	}
	for _, flag := range []string{"warn", "netns", "host-netns", "node-port-range", "cri-endpoint", "socket-iterators"} {
		var first *pflag.Flag
		for name, fs := range sets {
			f := fs.Lookup(flag)
			if f == nil {
				t.Errorf("eaddr %s has no --%s", name, flag)
				continue
			}
			if first == nil {
				first = f
				continue
			}
			if f.DefValue != first.DefValue || f.Value.Type() != first.Value.Type() {
				t.Errorf("--%s: default %q (%s) in one command, %q (%s) in another", flag, f.DefValue, f.Value.Type(), first.DefValue, first.Value.Type())
			}
		}
	}
}
