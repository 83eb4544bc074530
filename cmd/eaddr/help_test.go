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
		"trace": {traceHelp, func(fs *pflag.FlagSet) { new(TraceFlags).SetFlags(fs) }},
		"demo":  {demoHelp, func(fs *pflag.FlagSet) { new(DemoFlags).SetFlags(fs) }},
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
