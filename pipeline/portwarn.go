package pipeline

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/ports"
)

// DefaultPortsWarn is --warn: the share of the ports toward one destination
// at which a pod gets its EphemeralPortsNearlyExhausted Event.
const DefaultPortsWarn = 80

// unnamedGrace is how long a pod's netns over the mark may stay unnamed
// before its warnings count as dropped (UnnamedWarning): the sample that
// first finds it asked the runtime (PodByNetNS lists it, each call within
// its 1 s deadline), so until then its name is pending, not unknown.
const unnamedGrace = 5 * time.Second

// portWarnings turns each sample's pod netns holding --warn percent or
// more of the ports toward a destination into a Warning Event on that pod
// (--kube-events), before any connect() fails: EphemeralPortsNearlyExhausted,
// its note the look of diagnose.Nearly (the causes, who holds the ports,
// the fix), aggregated by the reporter like failures (one Event per pod and
// destination per --kube-events-interval, its count the samples that found
// it so). The sampler takes that second look at the netns (its culprits,
// ports.Config.Culprits) for the destinations of named pods over the mark
// only; this runs on its goroutine, never the reader's.
type portWarnings struct {
	warn int
	k    reportSink
	log  *slog.Logger
	// podUID is diagnose.PodOfProcess; tests replace it.
	podUID func(pid int) string
	// unnamedSince: a pod's netns over the mark with no name, since the
	// first sample that found it so; kept while each sample does.
	unnamedSince map[uint64]time.Time
}

// reportSink is what portWarnings needs of the Events reporter.
type reportSink interface {
	Report(kubeevent.Failure) bool
	UnnamedWarning()
}

func newPortWarnings(k reportSink, warn int, log *slog.Logger) *portWarnings {
	return &portWarnings{warn: warn, k: k, log: log, unnamedSince: map[uint64]time.Time{},
		podUID: func(pid int) string { uid, _ := diagnose.PodOfProcess(pid); return uid }}
}

// sampled reports the destinations of s's pod netns at or above the mark.
// The host's netns is no pod's (hostNetwork pods share it): it gets no
// Event, nor does a netns whose process is in no pod's cgroup (a node
// daemon's own). A pod whose name is not known gets none either: counted,
// once it has stayed unnamed for unnamedGrace.
func (w *portWarnings) sampled(s *ports.Sample) {
	unnamed := map[uint64]bool{}
	for i := range s.NetNS {
		n := &s.NetNS[i]
		if n.Host || n.Error != "" {
			continue
		}
		for _, d := range n.Destinations {
			if d.Percent < w.warn && !d.Exhausted {
				continue
			}
			if n.Pod == nil {
				if unnamed[n.Inode] || w.podUID(n.PID) != "" {
					unnamed[n.Inode] = true
					w.unnamed(n.Inode, s.At) // a pod's, but which Pod object is not known
				}
				continue
			}
			w.report(n, &d, s)
		}
	}
	for ino := range w.unnamedSince {
		if !unnamed[ino] {
			delete(w.unnamedSince, ino)
		}
	}
}

// unnamed counts a warning of a pod's netns whose name is not known, when
// it has been so for unnamedGrace (until then its name may be pending).
func (w *portWarnings) unnamed(inode uint64, at time.Time) {
	since, ok := w.unnamedSince[inode]
	if !ok {
		w.unnamedSince[inode] = at
		return
	}
	if at.Sub(since) >= unnamedGrace {
		w.k.UnnamedWarning()
	}
}

// report sends the Event of d, when the second look at the netns (the
// sample's culprit of d) found it still over the mark.
func (w *portWarnings) report(n *diagnose.NetNSReport, d *diagnose.Destination, s *ports.Sample) {
	dst, err := netip.ParseAddrPort(d.Remote)
	if err != nil {
		return // the sampler lists TCP destinations as ip:port; nothing else comes here
	}
	if d.Verdict == "" {
		// below the mark at the second look (the sockets changed), or the
		// netns could not be read again
		w.log.Debug("port warning: no second look", "netns", n.Inode, "destination", d.Remote, "why", d.Unknown)
		return
	}
	f := kubeevent.Failure{PodUID: n.Pod.UID, PodName: n.Pod.Name, Namespace: n.Pod.Namespace, Reason: kubeevent.ReasonNearlyExhausted,
		Action: "SamplePorts", Dest: dst, Verdict: d.Verdict, Count: 1, At: s.At}
	if len(d.Fix) > 0 {
		f.Fix = d.Fix[0]
	}
	w.k.Report(f)
}
