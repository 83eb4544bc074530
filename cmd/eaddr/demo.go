package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/netns"
)

// DemoFlags are the flags of `eaddr demo`.
type DemoFlags struct {
	Output string
	Port   int
	IPv6   bool
}

// SetFlags registers the flags on fs.
func (f *DemoFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "json", "how eaddr's events are shown: json or table")
	fs.IntVar(&f.Port, "port", 8080, "port of the listener inside the throwaway namespace")
	fs.BoolVar(&f.IPv6, "ipv6", false, "exhaust [::1] instead of 127.0.0.1")
}

const demoRange = "40000 40001"

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: eaddr demo [flags]

Reproduce ephemeral-port exhaustion and watch eaddr catch it (needs root):
in a new network namespace, ip_local_port_range is set to %q, both ports
are held by connections to a local listener, and each client found on this
machine (curl, GNU wget, busybox wget, busybox nc, OpenBSD nc, python3) tries
one more connection. Each client's own words are printed next to the event
eaddr caught. The namespace is removed at the end; nothing leaves it.

Flags:
%s`, demoRange, fs.FlagUsages())
	}
	var f DemoFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if f.Output != "json" && f.Output != "table" {
		return usageErrorf("--output must be json or table, not %q", f.Output)
	}
	if f.Port <= 0 || f.Port > 65535 {
		return usageErrorf("--port %d is not a port", f.Port)
	}

	ns, err := netns.New()
	if err != nil {
		return fmt.Errorf("creating the demo network namespace: %w", err)
	}
	defer ns.Close()
	host, network := "127.0.0.1", "tcp4"
	if f.IPv6 {
		host, network = "::1", "tcp6"
	}
	// A process that lives in the namespace for the whole demo, as a pod's
	// pause process does: eaddr reaches the netns through it to diagnose a
	// client that has already exited.
	if sleep, err := exec.LookPath("sleep"); err == nil {
		sb := exec.Command(sleep, "3600")
		if err := ns.Start(sb); err == nil {
			defer func() { sb.Process.Kill(); sb.Wait() }()
		}
	}
	ex, err := netns.Exhaust(ns, network, joinHostPort(host, f.Port), 40000, 40001)
	if err != nil {
		return fmt.Errorf("exhausting the demo namespace's ports: %w", err)
	}
	defer ex.Close()

	// Trace only this namespace, so the demo shows what its clients did and
	// nothing else on the node.
	var tf TraceFlags
	tf.SetFlags(pflag.NewFlagSet("demo-trace", pflag.ContinueOnError)) // trace's defaults
	tf.Output, tf.NetNS, tf.RingSize, tf.Explain = f.Output, uint32(ns.Inode()), 1<<20, "short"
	c, err := tf.config()
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		byPID    = map[uint32][]demoEvent{}
		attached = make(chan struct{})
	)
	hooks := traceHooks{
		attached: func() { close(attached) },
		event: func(ev *decode.Event, x *explain.Explanation, line []byte) {
			de := demoEvent{line: strings.TrimRight(string(line), "\n"), client: "unknown program"}
			if msg, ok := x.AppendClientMessage(nil); ok {
				de.predicted = string(msg)
			}
			if x.Client != nil {
				de.client = x.Client.Name
			}
			if x.Binary != nil && x.Binary.Libc != "" {
				de.client += ", " + string(x.Binary.Libc)
			}
			mu.Lock()
			byPID[ev.PID] = append(byPID[ev.PID], de)
			mu.Unlock()
		},
	}
	tctx, stopTrace := context.WithCancel(ctx)
	defer stopTrace()
	traceDone := make(chan error, 1)
	go func() { traceDone <- trace(tctx, c, io.Discard, log, hooks) }()
	select {
	case <-attached:
	case err := <-traceDone:
		return err
	case <-ctx.Done():
		return nil
	}

	clients, missing := findClients(host, f.Port)
	fmt.Fprintf(stdout, "eaddr demo: network namespace %d, ip_local_port_range %q, both ports held by connections to %s.\n",
		ns.Inode(), demoRange, joinHostPort(host, f.Port))
	if len(missing) > 0 {
		fmt.Fprintf(stdout, "not installed here, skipped: %s\n", strings.Join(missing, ", "))
	}
	caught := 0
	for _, cl := range clients {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stdout, "\n$ %s\n", strings.Join(append([]string{commOf(cl.Argv[0])}, cl.Argv[1:]...), " "))
		out, pid, err := runIn(ctx, ns, cl.Argv)
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if l != "" {
				fmt.Fprintf(stdout, "  %s\n", l)
			}
		}
		if err != nil {
			fmt.Fprintf(stdout, "  (%v)\n", err)
		}
		var lines []demoEvent
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			lines = byPID[uint32(pid)]
			mu.Unlock()
			if len(lines) > 0 {
				break
			}
		}
		if len(lines) == 0 {
			fmt.Fprintf(stdout, "eaddr: no failed connect() or bind() from pid %d\n", pid)
			continue
		}
		caught++
		for _, l := range lines {
			if l.predicted != "" {
				fmt.Fprintf(stdout, "eaddr predicted (%s):\n  %s\n", l.client, l.predicted)
			} else {
				fmt.Fprintf(stdout, "eaddr: %s; it prints no predictable line\n", l.client)
			}
			fmt.Fprintf(stdout, "eaddr event: %s\n", l.line)
		}
	}
	stopTrace()
	if err := <-traceDone; err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d of %d clients failed with an event from eaddr. The namespace is gone; to watch the node: sudo eaddr trace\n", caught, len(clients))
	return nil
}

// demoEvent is what the demo shows of one event.
type demoEvent struct {
	line      string // as trace printed it
	client    string // "busybox wget, glibc"
	predicted string // the line eaddr predicts the client printed
}

// runIn runs argv inside ns with stdin closed, and returns its combined
// output and pid. A failing exit status is expected and not an error.
func runIn(ctx context.Context, ns *netns.NS, argv []string) (string, int, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		return "", 0, err
	}
	pid := cmd.Process.Pid
	err := cmd.Wait()
	if _, exited := err.(*exec.ExitError); exited && cctx.Err() == nil {
		err = nil
	}
	return out.String(), pid, err
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
