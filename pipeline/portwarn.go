package pipeline

import (
	"log/slog"
	"net/netip"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
)

// DefaultPortsWarn is --warn: the share of the ports toward one destination
// at which a pod gets its EphemeralPortsNearlyExhausted Event.
const DefaultPortsWarn = 80

// portWarnings turns each sample's pod netns holding --warn percent or
// more of the ports toward a destination into a Warning Event on that pod
// (--kube-events), before any connect() fails: EphemeralPortsNearlyExhausted,
// its note the look of diagnose.Nearly (the causes, who holds the ports,
// the fix), aggregated by the reporter like failures (one Event per pod and
// destination per --kube-events-interval, its count the samples that found
// it so). It runs on the sampler's goroutine, never the reader's: the
// second look at the netns (a socket dump and the holders' search, within
// their budget) is paid only for a destination over the mark.
type portWarnings struct {
	warn int
	k    reportSink
	d    *diagnose.Diagnoser // its own: the trace's runs on the diagnosis worker
	log  *slog.Logger
	// nearly is d.Nearly, podUID diagnose.PodOfProcess; tests replace them.
	nearly func(inode uint64, pid int, dst netip.AddrPort, warn int) (*diagnose.Diagnosis, error)
	podUID func(pid int) string
}

// reportSink is what portWarnings needs of the Events reporter.
type reportSink interface {
	Report(kubeevent.Failure) bool
	UnnamedWarning()
}

func newPortWarnings(k reportSink, warn int, host uint64, log *slog.Logger) *portWarnings {
	d := diagnose.NewDiagnoser()
	d.HostNetNS = host
	return &portWarnings{warn: warn, k: k, d: d, log: log, nearly: d.Nearly,
		podUID: func(pid int) string { uid, _ := diagnose.PodOfProcess(pid); return uid }}
}

// sampled reports the destinations of s's pod netns at or above the mark.
// The host's netns is no pod's (hostNetwork pods share it): it gets no
// Event, nor does a netns whose process is in no pod's cgroup (a node
// daemon's own). A pod whose name is not known gets none either, counted.
func (w *portWarnings) sampled(s *PortSample) {
	for i := range s.NetNS {
		n := &s.NetNS[i]
		if n.Host {
			continue
		}
		for _, d := range n.Top {
			if d.Percent < w.warn {
				continue
			}
			if n.Pod == "" {
				if w.podUID(n.PID) != "" {
					w.k.UnnamedWarning() // a pod's, but which Pod object is not known
				}
				continue
			}
			w.check(n, d)
		}
	}
}

// check looks again at the netns toward d (the sample may be a moment old)
// and reports what it finds, if it is still over the mark.
func (w *portWarnings) check(n *NetNSPorts, d diagnose.Destination) {
	dst, err := netip.ParseAddrPort(d.Remote)
	if err != nil {
		return // the sampler lists TCP destinations as ip:port; nothing else comes here
	}
	g, err := w.nearly(n.Inode, n.PID, dst, w.warn)
	if err != nil {
		w.log.Debug("port warning: cannot look at the netns again", "netns", n.Inode, "destination", d.Remote, "err", err)
		return
	}
	if g == nil {
		return // below the mark now: the sockets changed since the sample
	}
	f := kubeevent.Failure{PodUID: n.PodUID, PodName: n.Pod, Namespace: n.Namespace, Reason: kubeevent.ReasonNearlyExhausted,
		Action: "SamplePorts", Dest: dst, Verdict: g.Verdict, Count: 1, At: g.At}
	if len(g.Fix) > 0 {
		f.Fix = g.Fix[0]
	}
	w.k.Report(f)
}
