package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/termtext"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pipeline"
)

// DemoFlags are the flags of `eaddr demo`.
type DemoFlags struct {
	Output string
	Port   int
	IPv6   bool

	tty *terminal // stdout when it is a terminal
}

// SetFlags registers the flags on fs.
func (f *DemoFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "", "how eaddr's events are shown: text (the default at a terminal), table, or json (the default when stdout is not a terminal), as in eaddr trace")
	fs.IntVar(&f.Port, "port", 8080, "port of the listener inside the throwaway namespace")
	fs.BoolVar(&f.IPv6, "ipv6", false, "exhaust [::1] instead of 127.0.0.1")
}

const demoRange = "40000 40001"

// demoHelp is eaddr demo --help.
var demoHelp = helpDoc{
	usage: "eaddr demo [flags]",
	about: `Reproduce ephemeral-port exhaustion and watch eaddr catch it (needs root): in a new network
namespace, ip_local_port_range is set to "` + demoRange + `", both ports are held by connections to a
local listener, and each client found on this machine (curl, GNU wget, busybox wget, busybox nc,
OpenBSD nc, python3) tries one more connection. Each client's own words are printed next to what
eaddr caught: who failed, what the client printed, the cause and the fix. The namespace is removed
at the end; nothing leaves it.`,
	examples: []example{
		{"watch curl, wget, nc and python3 fail, and eaddr name the cause", "sudo eaddr demo"},
		{"the same over IPv6, with eaddr's events as JSON", "sudo eaddr demo --ipv6 -o json"},
	},
	groups: []flagGroup{{"Flags", []string{"output", "port", "ipv6"}}},
	footer: "Exit status: 0 when the demo ran, 1 on a failure, 2 on bad usage, 3 without the privilege (root).",
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	fs.Usage = func() { writeHelp(stdout, fs, demoHelp, helpWidth(stdout)) }
	var f DemoFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	f.tty = stdoutTerminal(stdout)
	if f.Output == "" {
		f.Output = defaultOutput(f.tty)
	}
	if _, err := output.ParseFormat(f.Output, output.Text, output.Table, output.JSON); err != nil {
		return usageErrorf("--output: %v", err)
	}
	if f.Port <= 0 || f.Port > 65535 {
		return usageErrorf("--port %d is not a port", f.Port)
	}

	if !hasCapability(unix.CAP_SYS_ADMIN) {
		return privilegeError{errors.New("demo needs root: it makes a network namespace and loads eaddr's BPF programs (run it with sudo)")}
	}
	ns, host, cleanup, err := demoScene(f)
	if err != nil {
		return err
	}
	defer cleanup()
	// The demo's own trace logs only what went wrong: its attach and its
	// totals are the demo's to tell, on stdout.
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := startDemoTrace(ctx, f, ns, quiet)
	if err != nil || w == nil {
		return err
	}
	defer w.stop()

	clients, missing := demo.FindClients(host, f.Port)
	fmt.Fprintf(stdout, "eaddr demo: netns %d, ip_local_port_range %q, both ports held by connections to %s.\n",
		ns.Inode(), demoRange, joinHostPort(host, f.Port))
	if len(missing) > 0 {
		fmt.Fprintln(stdout, demo.MissingLine(missing))
	}
	caught := 0
	for _, cl := range clients {
		if ctx.Err() != nil {
			break
		}
		if demoClient(ctx, stdout, ns, cl, w, f.Output) {
			caught++
		}
	}
	if err := w.stop(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d of %d clients failed with an event from eaddr. The namespace is gone; to watch the node: sudo eaddr trace\n", caught, len(clients))
	return nil
}

// demoScene makes the throwaway netns: a two-port range, both ports held by
// connections to a local listener, and a process living in it as a pod's
// pause process does (eaddr reaches the netns through it to diagnose a
// client that has already exited).
func demoScene(f DemoFlags) (ns *netns.NS, host string, cleanup func(), err error) {
	ns, err = netns.New()
	if err != nil {
		return nil, "", nil, fmt.Errorf("creating the demo network namespace: %w", err)
	}
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() { ns.Close() })
	host, network := "127.0.0.1", "tcp4"
	if f.IPv6 {
		host, network = "::1", "tcp6"
	}
	if sleep, err := exec.LookPath("sleep"); err == nil {
		sb := exec.Command(sleep, "3600")
		if err := ns.Start(sb); err == nil {
			undo = append(undo, func() { sb.Process.Kill(); sb.Wait() })
		}
	}
	ex, err := netns.Exhaust(ns, network, joinHostPort(host, f.Port), 40000, 40001)
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("exhausting the demo namespace's ports: %w", err)
	}
	undo = append(undo, func() { ex.Close() })
	return ns, host, cleanup, nil
}

// demoWatch is the demo's trace of its netns: the events it caught, by pid.
type demoWatch struct {
	mu      sync.Mutex
	byPID   map[uint32][]demoEvent
	cancel  context.CancelFunc
	done    chan error
	stopped bool
	err     error
}

// startDemoTrace traces only the demo's netns, so the demo shows what its
// clients did and nothing else on the node. nil, nil: ctx ended first.
func startDemoTrace(ctx context.Context, f DemoFlags, ns *netns.NS, log *slog.Logger) (*demoWatch, error) {
	var tf TraceFlags
	tf.SetFlags(pflag.NewFlagSet("demo-trace", pflag.ContinueOnError)) // trace's defaults
	tf.Output, tf.tty, tf.NetNS, tf.RingSize, tf.Explain = f.Output, f.tty, []string{strconv.FormatUint(ns.Inode(), 10)}, 1<<20, "short"
	c, err := tf.config()
	if err != nil {
		return nil, err
	}
	// Its clients are its own, in its netns: no pod's names to miss, and
	// no warning to wrap across the screen on a node whose runtime eaddr
	// cannot reach.
	c.NoPods = true
	w := &demoWatch{byPID: map[uint32][]demoEvent{}, done: make(chan error, 1)}
	attached := make(chan struct{})
	hooks := pipeline.Hooks{Attached: func() { close(attached) }, Event: w.record}
	tctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() {
		_, err := pipeline.Run(tctx, c, io.Discard, log, hooks)
		w.done <- err
	}()
	select {
	case <-attached:
		return w, nil
	case err := <-w.done:
		cancel()
		return nil, err
	case <-ctx.Done():
		cancel()
		<-w.done
		return nil, nil
	}
}

func (w *demoWatch) record(ev *decode.Event, x *explain.Explanation, line []byte) {
	de := demoEvent{line: strings.TrimRight(string(line), "\n"), client: "unknown program"}
	if x.HasClientMessage {
		de.predicted = string(x.ClientMessage)
	}
	if x.Client != nil {
		de.client = x.Client.Name
	}
	if x.Binary != nil && x.Binary.Libc != "" {
		de.client += ", " + string(x.Binary.Libc)
	}
	w.mu.Lock()
	w.byPID[ev.PID] = append(w.byPID[ev.PID], de)
	w.mu.Unlock()
}

// events waits up to d for the events of pid.
func (w *demoWatch) events(pid int, d time.Duration) []demoEvent {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		lines := w.byPID[uint32(pid)]
		w.mu.Unlock()
		if len(lines) > 0 || time.Now().After(deadline) {
			return lines
		}
	}
}

// stop ends the trace (once) and returns its error.
func (w *demoWatch) stop() error {
	if !w.stopped {
		w.stopped = true
		w.cancel()
		w.err = <-w.done
	}
	return w.err
}

// demoClient runs one client in the netns and prints what it said next to
// what eaddr caught; true when eaddr caught it. In the text and table forms
// the event's own lines say what the client prints, the cause and the fix.
func demoClient(ctx context.Context, stdout io.Writer, ns *netns.NS, cl demo.Client, w *demoWatch, form string) bool {
	fmt.Fprintf(stdout, "\n$ %s\n", strings.Join(append([]string{demo.CommOf(cl.Argv[0])}, cl.Argv[1:]...), " "))
	out, pid, err := demo.RunIn(ctx, ns, cl.Argv, clientTimeout)
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l != "" { // what a program printed goes through termtext, as every workload's text
			fmt.Fprintf(stdout, "  %s\n", termtext.String(l))
		}
	}
	if err != nil {
		fmt.Fprintf(stdout, "  (%v)\n", err)
	}
	lines := w.events(pid, 2*time.Second)
	if len(lines) == 0 {
		fmt.Fprintf(stdout, "eaddr: no failed connect() or bind() from pid %d\n", pid)
		return false
	}
	for _, l := range lines {
		switch form {
		case "text":
			fmt.Fprintf(stdout, "eaddr caught it:\n%s\n", l.line)
			continue
		case "table":
			fmt.Fprintf(stdout, "eaddr caught it:\n%s\n%s\n", output.TableHeader, l.line)
			continue
		}
		if l.predicted != "" {
			fmt.Fprintf(stdout, "eaddr predicted (%s):\n  %s\n", l.client, l.predicted)
		} else {
			fmt.Fprintf(stdout, "eaddr: %s; it prints no predictable line\n", l.client)
		}
		fmt.Fprintf(stdout, "eaddr event: %s\n", l.line)
	}
	return true
}

// demoEvent is what the demo shows of one event.
type demoEvent struct {
	line      string // as trace printed it
	client    string // "busybox wget, glibc"
	predicted string // the line eaddr predicts the client printed
}

// clientTimeout bounds each client the demo runs.
const clientTimeout = 10 * time.Second

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
