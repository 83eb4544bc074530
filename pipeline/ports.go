package pipeline

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
)

// The port sampler (--ports-interval): every interval, the port budget of
// every network namespace with a live process, with the model of the
// diagnosis and `eaddr check` (diagnose.AuditNetNS), before any failure.
// It runs on a goroutine and ticker of its own, never on the ring reader's.

// DefaultPortsInterval and DefaultPortsTop are --ports-interval and --ports-top.
const (
	DefaultPortsInterval = 15 * time.Second
	DefaultPortsTop      = 3
)

// NetNSPorts is one netns's port budget at one sample.
type NetNSPorts struct {
	Inode          uint64
	PID            int // the process it was entered through
	Host           bool
	Namespace, Pod string                 // the pod that owns it; empty for the host's or when not known
	PodUID         string                 // set with Pod
	Usable         int                    // ports of the range not reserved
	HeldForAll     int                    // ports no connect() can have, whatever the destination
	Top            []diagnose.Destination // the busiest destinations, most ports first
}

// PortSample is one pass over the node's netns.
type PortSample struct {
	NetNS   []NetNSPorts  // sorted by inode
	Skipped int           // netns that could not be entered or read: left out, not guessed
	Took    time.Duration // how long the sample took
	Next    time.Duration // the wait before the next: the interval, stretched by nextWait
}

// portSampler samples the netns; its fields are set once, before run.
type portSampler struct {
	every time.Duration
	opts  diagnose.AuditOptions // Top, Iter, HostNetNS
	log   *slog.Logger
	// members lists the netns with a live process (diagnose.NetNSMembers);
	// podOf names a netns's pod (nil: not known, or not named); publish gets
	// each sample (the metrics, the port warnings). Tests replace them.
	members func() (map[uint64]int, error)
	now     func() time.Time
	podOf   func(inode uint64) *decode.Pod
	publish func(*PortSample)
}

func newPortSampler(every time.Duration, top int, host uint64, iter netdiag.SocketReader, log *slog.Logger) *portSampler {
	o := diagnose.AuditOptions{HostNetNS: host, Top: top, Warn: 100, Crit: 100}
	if iter != nil {
		o.Iter = iter
	}
	return &portSampler{every: every, opts: o, log: log, members: diagnose.NetNSMembers, now: time.Now,
		podOf:   func(uint64) *decode.Pod { return nil },
		publish: func(*PortSample) {}}
}

// sample audits every netns with a live process once.
func (s *portSampler) sample() (*PortSample, error) {
	members, err := s.members()
	if err != nil {
		return nil, err
	}
	out := &PortSample{}
	for inode, pid := range members {
		r := diagnose.AuditNetNS(inode, pid, s.opts)
		if r.Error != "" {
			out.Skipped++ // the netns went away, or its sockets could not be listed
			continue
		}
		n := NetNSPorts{Inode: inode, PID: r.PID, Host: r.Host, Usable: r.Usable, HeldForAll: r.HeldForAll, Top: r.Destinations}
		if !r.Host {
			if p := s.podOf(inode); p != nil {
				n.Namespace, n.Pod, n.PodUID = p.Namespace, p.Name, p.UID
			}
		}
		out.NetNS = append(out.NetNS, n)
	}
	sort.Slice(out.NetNS, func(i, j int) bool { return out.NetNS[i].Inode < out.NetNS[j].Inode })
	return out, nil
}

// maxShare is the most of a core the sampler may take: a sample that
// took longer than maxShare of the interval stretches the wait before the
// next one (a node with many netns and sockets: every netns's dump walks
// the whole node's socket tables; docs/performance.md, "Port sampler").
const maxShare = 100 // 1/100: 1% of a core

// nextWait is how long to wait after a sample that took took: the
// interval, or maxShare times took when that is longer. The time is the
// sample's whole time, so at least the CPU time of its one goroutine.
func nextWait(every, took time.Duration) time.Duration {
	return max(every, maxShare*took)
}

// start runs the sampler on its own goroutine until ctx is done or the
// returned stop is called; stop waits for a sample in progress to end.
func (s *portSampler) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := s.once(s.every)
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				wait = s.once(wait)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// once takes one sample and publishes it; a failed listing is logged. It
// returns the wait before the next, saying so when it changes from last.
func (s *portSampler) once(last time.Duration) time.Duration {
	start := s.now()
	p, err := s.sample()
	took := s.now().Sub(start)
	wait := nextWait(s.every, took)
	if err != nil {
		s.log.Warn("port sampler: cannot list the network namespaces", "err", err)
	} else {
		if p.Skipped > 0 {
			s.log.Debug("port sampler: netns skipped", "skipped", p.Skipped)
		}
		p.Took, p.Next = took, wait
		s.publish(p)
	}
	if wait != last && (wait > s.every || last > s.every) {
		s.log.Info("port sampler: sampling every "+wait.Round(time.Second).String()+" to stay within 1% of a core",
			"sample_took", took.Round(time.Millisecond).String(), "ports_interval", s.every.String())
	}
	return wait
}

// startPorts starts the trace's sampler: sockets read with sock_diag, the
// trace's runtime client for the pods' names; each sample goes to the
// metrics (--metrics-addr) and the port warnings (--kube-events). Not the
// BPF socket iterator even with --socket-iterators: a sample with it cost
// 1.6 times the CPU of one with sock_diag (docs/performance.md, "Port
// sampler"); sock_diag's unknown bind buckets are counted apart (Unsure).
func (r *traceRun) startPorts(ctx context.Context) (stop func()) {
	s := newPortSampler(r.c.PortsInterval, max(r.c.PortsTop, 1), r.pods.HostNetNS, nil, r.log)
	s.podOf = func(inode uint64) *decode.Pod {
		p, ok := r.names.PodByNetNS(inode)
		if !ok || p.Name == "" || p.Namespace == "" || p.UID == "" { // a name not known is left empty, not guessed
			return nil
		}
		return p
	}
	var to []func(*PortSample)
	if r.met != nil {
		to = append(to, r.met.port.sampled)
	}
	if f := r.nodeBudgetSampler(); f != nil { // nodebudget.go: the node's SNAT and conntrack
		to = append(to, f)
	}
	if r.c.KubeEvents != nil {
		w := newPortWarnings(r.c.KubeEvents, r.c.PortsWarn, r.pods.HostNetNS, r.log)
		to = append(to, w.sampled)
	}
	s.publish = func(p *PortSample) {
		for _, f := range to {
			f(p)
		}
	}
	return s.start(ctx)
}
