package pipeline

import (
	"context"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/ports"
)

// The port sampler (--ports-interval) is package ports', the one that top
// and check use: every interval, the port budget of every netns with a
// live process, before any failure. The trace consumes its samples: the
// port metrics (--metrics-addr) and the port warnings (--kube-events). It
// runs on a goroutine of its own, never on the ring reader's.

// DefaultPortsInterval and DefaultPortsTop are --ports-interval and --ports-top.
const (
	DefaultPortsInterval = 15 * time.Second
	DefaultPortsTop      = 3
)

// startPorts starts the trace's sampler (of the --netns netns only, when
// given): each sample goes to the metrics and the port warnings; with
// --kube-events, the destinations of a named pod at --warn or above get
// their holders and fix (the warning's note).
// A netns the node walk does not read is read with sock_diag, as before
// the walk: with the BPF socket iterators such a read cost as much or
// more (docs/performance.md, "Port sampler"); sock_diag's unknown bind
// buckets are counted apart (Unsure).
func (r *traceRun) startPorts(ctx context.Context) (stop func()) {
	top := max(r.c.PortsTop, 1)
	c := ports.Config{Audit: diagnose.AuditOptions{HostNetNS: r.pods.HostNetNS, Top: top, Warn: r.c.PortsWarn, Crit: 100},
		Log: r.log, PodOf: r.podOfNetNS}
	// --netns: those netns only, as for the failures (a netns named in
	// /run/netns may hold no process: read through its mount).
	for _, ino := range r.c.NetNS {
		c.Only, c.Mounts = append(c.Only, uint64(ino)), true
	}
	var w *portWarnings
	if r.c.KubeEvents != nil {
		w = newPortWarnings(r.c.KubeEvents, r.c.PortsWarn, r.log)
		c.Culprits, c.CulpritsOf = top, func(n *diagnose.NetNSReport) bool { return !n.Host && n.Pod != nil }
	}
	budget := r.nodeBudgetSampler() // nodebudget.go: the node's SNAT and conntrack
	s := ports.New(c)
	stopSampling := s.Start(ctx, r.c.PortsInterval, ports.TraceShare, func(p *ports.Sample, next time.Duration) {
		if r.met != nil {
			r.met.port.sampled(p, next)
		}
		if budget != nil {
			budget(p)
		}
		if w != nil {
			w.sampled(p)
		}
	})
	return func() { stopSampling(); s.Close() }
}

// podOfNetNS is the pod of a netns as the trace's runtime client names it;
// nil when a name is not known: left empty, not guessed.
func (r *traceRun) podOfNetNS(inode uint64) *diagnose.CheckPod {
	p, ok := r.names.PodByNetNS(inode)
	if !ok || p.Name == "" || p.Namespace == "" || p.UID == "" {
		return nil
	}
	return &diagnose.CheckPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
}
