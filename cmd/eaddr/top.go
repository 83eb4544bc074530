package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/pipeline"
	"github.com/eaddr/eaddr/top"
)

// TopFlags are the flags of `eaddr top`.
type TopFlags struct {
	Interval time.Duration
	Once     bool
	Sort     string
	Trace    bool
	Check    CheckFlags // the audit's: output, --warn, node port range, host netns, --netns, socket iterators, CRI
}

// SetFlags registers the flags on fs; topHelp groups them.
func (f *TopFlags) SetFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.Interval, "interval", 2*time.Second, "time between samples (with --once, between its two); a sample that takes longer than a tenth of it stretches the wait to 10 times its time")
	fs.BoolVar(&f.Once, "once", false, "print one snapshot and exit (two samples --interval apart, for the trend), for scripts and kubectl debug node/...")
	fs.StringVarP(&f.Check.Output, "output", "o", "text", "text (or table): the table for a person (live at a terminal); json: a line per snapshot")
	fs.StringVar(&f.Sort, "sort", "eta", "order of the rows: eta (time to exhaustion), used, trend, failures, name")
	fs.IntVar(&f.Check.Warn, "warn", pipeline.DefaultPortsWarn, "under a row at this percent or more, the holders and the fix (as eaddr check --warn); the node's SNAT and conntrack rows show from half of it")
	fs.BoolVar(&f.Trace, "trace", true, "count failures per netns with eaddr's tracer (EADDRNOTAVAIL, EADDRINUSE); false: the column shows -")
	f.Check.setCommonFlags(fs)
}

// topHelp is eaddr top --help.
var topHelp = helpDoc{
	usage: "eaddr top [flags]",
	about: `A live view of this node's network namespaces, like top (needs root): one row per netns (pod
namespace/name, host, netns NAME for ip netns, or netns:INODE (process)), its busiest destination,
the ports a connect() toward it could not have now (TAKEN) against the usable range, the trend in
ports per minute, the time until no port is left toward it (only while the trend rises), and the
failures per second eaddr's tracer counted there. Under a row at --warn or more: who holds its ports
and the fix, as eaddr trace diagnoses a failure. Above them, once the node's SNAT (MASQUERADE)
toward a destination or its conntrack table is at half of --warn or more (40% by default): egress ->
destination, the conntrack entries holding its ports of the MASQUERADE range, the pod (or address)
holding the most, and the table's use of its max; what cannot be read (no CAP_NET_ADMIN) is said in
the header. Keys: q quit, s or > next sort, < previous sort, p or space pause. Not at a terminal it
prints a plain table every interval. Columns: docs/top.md.`,
	examples: []example{
		{"watch the node", "sudo eaddr top"},
		{"one snapshot, from a node debug pod", "kubectl debug node/NODE -it --profile=sysadmin --image=IMAGE -- /eaddr top --once \\\n      --cri-endpoint /host/run/containerd/containerd.sock"},
		{"one pod's netns, as JSON", "sudo eaddr top --once -o json --netns $(stat -L -c %i /proc/PID/ns/net)"},
	},
	groups: []flagGroup{
		{"What to show", []string{"netns", "warn", "sort", "interval", "once", "trace", "node-port-range", "host-netns"}},
		{"Output", []string{"output"}},
		{"Sources", []string{"cri-endpoint", "socket-iterators"}},
	},
	footer: "Exit status: 0 on q, Ctrl-C or a closed stdout, 1 on a failure, 2 on bad usage, 3 without the privilege to look\n(root, or CAP_SYS_ADMIN and CAP_SYS_PTRACE).",
}

func runTop(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("top", pflag.ContinueOnError)
	fs.Usage = func() { writeHelp(stdout, fs, topHelp, helpWidth(stdout)) }
	var f TopFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	sortKey, err := f.check()
	if err != nil {
		return err
	}
	if err := needPrivilege("top"); err != nil {
		return err
	}
	o, err := topAuditOptions(&f.Check)
	if err != nil {
		return err
	}
	netdiag.SetLogger(log)
	a := openNodeAudit(&f.Check, o, 1, log) // a row is its busiest destination: its holders and fix
	defer a.close()
	s := &top.Sampler{Audit: a.audit, NodeBudgets: func() (*diagnose.NodeBudgets, error) {
		return diagnose.ReadNodeBudgets(o.HostNetNS, top.NodeBudgetsRead, a.cri.PodByIP)
	}}
	stopCounting := startCounting(&f, s, log)
	defer stopCounting()
	m := top.NewModel()
	m.Sort, m.Warn = sortKey, f.Check.Warn
	return showTop(ctx, &f, s, m, stdout)
}

// check validates the flags; it returns the sort key.
func (f *TopFlags) check() (top.SortKey, error) {
	if err := f.Check.checkOutput(); err != nil {
		return 0, err
	}
	if f.Check.Warn < 1 || f.Check.Warn > 100 {
		return 0, usageErrorf("--warn must be a percent from 1 to 100, not %d", f.Check.Warn)
	}
	if f.Interval < 0 || (!f.Once && f.Interval < 100*time.Millisecond) {
		return 0, usageErrorf("--interval %s: at least 100ms (0 only with --once)", f.Interval)
	}
	k, err := top.ParseSort(f.Sort)
	if err != nil {
		return 0, usageErrorf("--sort: %v", err)
	}
	return k, f.Check.parseCommon()
}

// topAuditOptions are check's audit options for f: the NodePort range
// and the host's netns (top lists the busiest 5 destinations, so that the
// trend of the busiest one goes on when it and the second swap places).
func topAuditOptions(f *CheckFlags) (diagnose.AuditOptions, error) {
	lo, hi, err := parsePortRange(f.NodePortRange)
	if err != nil {
		return diagnose.AuditOptions{}, usageErrorf("--node-port-range: %v", err)
	}
	if f.HostNetNS == 0 {
		if f.HostNetNS, err = netdiag.HostInode(); err != nil {
			return diagnose.AuditOptions{}, fmt.Errorf("finding the host network namespace: %w", err)
		}
	}
	return diagnose.AuditOptions{HostNetNS: f.HostNetNS, NodePortLo: lo, NodePortHi: hi, Warn: f.Warn, Crit: max(90, f.Warn), Top: 5}, nil
}

// startCounting attaches the failure counter unless --trace=false; when
// it cannot, the sampler says why. It returns the counter's Close.
func startCounting(f *TopFlags, s *top.Sampler, log *slog.Logger) func() {
	if !f.Trace {
		s.NoFailuresWhy = "--trace=false"
		return func() {}
	}
	c, err := top.StartFailureCounter(log)
	if err != nil {
		s.NoFailuresWhy = "the tracer could not be attached: " + err.Error()
		return func() {}
	}
	s.Failures = c
	return func() { c.Close() }
}

// showTop runs the view f asks for: once, interactive on a terminal, or
// plain.
func showTop(ctx context.Context, f *TopFlags, s *top.Sampler, m *top.Model, stdout io.Writer) error {
	if f.Once {
		return top.Once(ctx, s, m, f.Interval, f.Check.json, termWidth(stdout), stdout)
	}
	out, isFile := stdout.(*os.File)
	if !f.Check.json && isFile && term.IsTerminal(int(out.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
		return top.Interactive(ctx, s, m, f.Interval, os.Stdin, out)
	}
	return top.Plain(ctx, s, m, f.Interval, f.Check.json, termWidth(stdout), stdout)
}
