package main

import (
	"context"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

func TestMain(m *testing.M) { eaddrtest.Main(m) }

func TestUsage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args     []string
		code     int
		stderrRe string // substring of stderr
		stdoutRe string
	}{
		{[]string{}, 2, "Usage:", ""},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`, ""},
		{[]string{"trace", "--bogus"}, 2, "unknown flag: --bogus", ""},
		{[]string{"trace", "--output", "xml"}, 2, `--output: "xml" is not one of text, table or json`, ""},
		{[]string{"trace", "--errno", "ENOPE"}, 2, `unknown errno "ENOPE"`, ""},
		{[]string{"trace", "--syscall", "accept"}, 2, `"accept" is not connect or bind`, ""},
		{[]string{"trace", "--pid", "-1"}, 2, "invalid argument", ""},
		{[]string{"trace", "--ring-size", "1000"}, 2, "not a power of two", ""},
		{[]string{"trace", "extra"}, 2, "takes no arguments", ""},
		{[]string{"demo", "--port", "0"}, 2, "is not a port", ""},
		{[]string{"trace", "--netns", "no-such-netns"}, 2, `--netns "no-such-netns" is neither a namespace inode nor a name in /run/netns`, ""},
		{[]string{"trace", "--help"}, 0, "", "--errno"},
		{[]string{"help", "trace"}, 0, "", "--errno"},
		{[]string{"demo", "--help"}, 0, "", "ip_local_port_range"},
		{[]string{"help", "demo"}, 0, "", "ip_local_port_range"},
		{[]string{"help", "frobnicate"}, 2, `help: unknown command "frobnicate"`, ""},
		{[]string{"version"}, 0, "", "\ncommit: "},
		{[]string{"--version"}, 0, "", "\ngo: go1."},
		{[]string{"--help"}, 0, "", "eaddr trace"},
	} {
		out, errOut, code := eaddrtest.Run(t, ctx, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderrRe) || !strings.Contains(out, tc.stdoutRe) {
			t.Errorf("eaddr %q: exit %d, stderr %q, stdout %q; want exit %d, stderr with %q, stdout with %q",
				tc.args, code, errOut, out, tc.code, tc.stderrRe, tc.stdoutRe)
		}
		if tc.code == 2 && len(tc.args) > 0 && strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("eaddr %q: usage error is not one line: %q", tc.args, errOut)
		}
	}
}
