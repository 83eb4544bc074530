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
	"github.com/eaddr/eaddr/top"
)

// TopFlags are the flags of `eaddr top`.
type TopFlags struct {
	Interval time.Duration
	Once     bool
	Output   string
	Sort     string
	Trace    bool
	Check    CheckFlags // the audit's: node port range, host netns, --netns, socket iterators, CRI
}

// SetFlags registers the flags on fs.
func (f *TopFlags) SetFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.Interval, "interval", 2*time.Second, "time between samples, stretched to 10 times a sample's time when a sample takes longer than a tenth of it; with --once, between its two samples (0: one sample, so no trend)")
	fs.BoolVar(&f.Once, "once", false, "print one snapshot and exit (two samples --interval apart, for the trend), for scripts and kubectl debug node/...")
	fs.StringVarP(&f.Output, "output", "o", "table", "table for a person, json for a script (one line per snapshot)")
	fs.StringVar(&f.Sort, "sort", "eta", "order of the rows: eta (time to exhaustion), used, trend, failures, name")
	fs.BoolVar(&f.Trace, "trace", true, "count failures per netns with eaddr's tracer (EADDRNOTAVAIL, EADDRINUSE); false: the column shows -")
	fs.StringVar(&f.Check.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint64Var(&f.Check.HostNetNS, "host-netns", 0, "inode of the node's network namespace (default: that of pid 1, else of kthreadd, pid 2, a kernel thread always in it)")
	fs.UintSliceVar(&f.Check.NetNS, "netns", nil, "show only these netns inodes (default: every netns found through /proc or mounted, as ip netns add does)")
	fs.BoolVar(&f.Check.SocketIterators, "socket-iterators", true, "read sockets with BPF socket iterators, as eaddr check does; false: sock_diag only")
	fs.StringVar(&f.Check.CRIEndpoint, "cri-endpoint", "", "container runtime socket, to name the pod of each netns (default: the usual containerd, k3s, CRI-O and cri-dockerd sockets)")
}

const topUsage = `Usage: eaddr top [flags]

A live view of this node's network namespaces, like top (needs root): one row per netns
(pod namespace/name, host, netns NAME for ip netns, or netns:INODE (process)), its busiest
destination, the ports a connect() toward it could not have now (TAKEN: held toward it or
for every destination) against the usable range, with a bar; the trend in ports per minute
(least squares over the last %d samples of that destination, at least %d); the time until no
port is left toward it, only while the trend rises; the failures per second (EADDRNOTAVAIL,
EADDRINUSE) eaddr's tracer counted in that netns over the last interval. The numbers are
eaddr check's port model. Under a row at 70%%%% or more: the processes that hold its ports
(pid, comm, pod) and the fix, as eaddr trace diagnoses a failure toward it (the live view:
under the first such row). What is not known shows "-": the JSON says why, the header says
why failures are not counted; a netns that could not be audited shows its error.

Keys: q quit, s or > next sort, < previous sort, p or space pause (no sampling while paused).
When stdout is not a terminal it prints a table every interval, with no escape codes.
A sample audits every netns in turn; one that takes longer than a tenth of --interval (a node of
100 netns with 500 sockets each: about 6 s) stretches the wait to 10 times its time, so that top
takes about a tenth of a core, and the header says so. --netns narrows it to the netns you watch.

Flags:
%%s`

func runTop(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("top", pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(stderr, fmt.Sprintf(topUsage, top.HistoryLen, top.MinSamples), fs.FlagUsages()) }
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
	s := &top.Sampler{Audit: func() ([]diagnose.NetNSReport, error) {
		found, err := listNetNS()
		if err != nil {
			return nil, err
		}
		return a.audit(found), nil
	}}
	stopCounting := startCounting(&f, s, log)
	defer stopCounting()
	m := top.NewModel()
	m.Sort = sortKey
	return showTop(ctx, &f, s, m, stdout)
}

// check validates the flags; it returns the sort key.
func (f *TopFlags) check() (top.SortKey, error) {
	if f.Output != "table" && f.Output != "json" {
		return 0, usageErrorf("--output must be table or json, not %q", f.Output)
	}
	if f.Interval < 0 || (!f.Once && f.Interval < 100*time.Millisecond) {
		return 0, usageErrorf("--interval %s: at least 100ms (0 only with --once)", f.Interval)
	}
	k, err := top.ParseSort(f.Sort)
	if err != nil {
		return 0, usageErrorf("--sort: %v", err)
	}
	return k, checkCRIFlag(f.Check.CRIEndpoint)
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
	return diagnose.AuditOptions{HostNetNS: f.HostNetNS, NodePortLo: lo, NodePortHi: hi, Warn: 70, Crit: 90, Top: 5}, nil
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
		return top.Once(ctx, s, m, f.Interval, f.Output == "json", termWidth(stdout), stdout)
	}
	out, isFile := stdout.(*os.File)
	if f.Output == "table" && isFile && term.IsTerminal(int(out.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
		return top.Interactive(ctx, s, m, f.Interval, os.Stdin, out)
	}
	return top.Plain(ctx, s, m, f.Interval, f.Output == "json", termWidth(stdout), stdout)
}
