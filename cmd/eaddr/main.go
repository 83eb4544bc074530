// Command eaddr shows why connect() and bind() fail on this node:
// EADDRNOTAVAIL from exhausted ephemeral ports, EADDRINUSE, and (with
// --errno all) every other failure, with the process, netns, cgroup and tuple.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/eaddr/eaddr/tracer"
)

const usage = `eaddr: see which process, netns and cgroup is failing connect()/bind()
with EADDRNOTAVAIL (ephemeral ports exhausted) or EADDRINUSE.

Usage:
  eaddr trace [flags]   trace failures on this node (root); JSON lines on stdout
  eaddr demo [flags]    reproduce port exhaustion in a throwaway netns and trace it (root)
  eaddr check [flags]   audit every netns's port range, NodePort overlap and port use (root;
                        without CAP_SYS_ADMIN and CAP_SYS_PTRACE it exits 3 and audits nothing)
  eaddr top [flags]     a live view of every netns's ports toward its busiest destination: used,
                        trend, time to exhaustion, failures/s (root; --once for one snapshot)
  eaddr explain TEXT    explain an error message or errno, offline (no root; TEXT, or a log on stdin)
  eaddr version         print the version, commit and Go version
  eaddr help COMMAND    the flags and examples of a command (as eaddr COMMAND --help)

Exit status: 0 clean, 1 a runtime failure (for check, also a warning or critical finding),
2 bad usage, 3 no privilege to look (or, for check, a netns it could not audit).

A pod says "Address not available" or "Cannot assign requested address"? docs/runbook.md.
`

// commands are the commands that have a --help of their own.
var commands = map[string]bool{"trace": true, "demo": true, "check": true, "top": true, "explain": true}

// errUsage marks errors that are the caller's fault: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() {
	// A reader that goes away must end the trace with its totals, not kill
	// eaddr with SIGPIPE: ignored, a write returns EPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitNoPrivilege is the status of a command that lacks the privilege to
// look at all: not a finding, not a usage error. A node-problem-detector
// plugin reads it as "unknown", as Nagios does 3.
const exitNoPrivilege = 3

// privilegeError says what privilege a command needs: exit status 3.
type privilegeError struct{ err error }

func (e privilegeError) Error() string { return e.err.Error() }
func (e privilegeError) Unwrap() error { return e.err }

// Main runs one command and returns the exit status: 0 on a clean stop, 1 on
// a runtime failure, 2 on bad usage, 3 when eaddr check lacks the privilege
// to look or could not audit a network namespace (unknown).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "trace":
		err = runTrace(ctx, args[1:], stdout, stderr, log)
	case "demo":
		err = runDemo(ctx, args[1:], stdout, stderr, log)
	case "check":
		err = runCheck(ctx, args[1:], stdout, stderr, log)
	case "top":
		err = runTop(ctx, args[1:], stdout, stderr, log)
	case "explain":
		err = runExplain(ctx, args[1:], stdout, stderr, log)
	case "version", "--version":
		writeVersion(stdout)
	case "help", "-h", "--help":
		if len(args) > 1 && commands[args[1]] {
			return Main(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		if len(args) > 1 {
			err = usageErrorf("help: unknown command %q (commands: trace, demo, check, top, explain, version)", args[1])
			break
		}
		fmt.Fprint(stdout, usage)
	default:
		err = usageErrorf("unknown command %q (commands: trace, demo, check, top, explain, version)", args[0])
	}
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, syscall.EPIPE):
		// The reader closed stdout (top | head): what it wanted, it got.
		return 0
	case errors.As(err, new(quietError)):
		return 1
	case errors.As(err, new(usageError)):
		// pflag quotes the offending argument whole: keep the line short.
		msg := err.Error()
		if short := prefixUTF8(msg, 300); len(short) < len(msg) {
			msg = short + "..."
		}
		fmt.Fprintf(stderr, "eaddr: %s\n", msg)
		return 2
	case errors.As(err, new(privilegeError)), errors.As(err, new(unknownError)), errors.Is(err, tracer.ErrPrivilege):
		fmt.Fprintf(stderr, "eaddr: %v\n", err)
		return exitNoPrivilege
	default:
		fmt.Fprintf(stderr, "eaddr: %v\n", err)
		return 1
	}
}

// parse parses args into fs and turns pflag's errors into usage errors.
func parse(fs *pflag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s takes no arguments, got %q", fs.Name(), fs.Args())
	}
	return nil
}
