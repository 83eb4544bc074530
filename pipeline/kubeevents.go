package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
)

// kubeEvents is the consumer that hands a written failure of a named pod
// to the Events reporter (--kube-events), unless its program causes it on
// purpose; one of a pod whose names are not known is counted as unnamed. It never waits and does not allocate: the strings are the
// pod's, the diagnosis's and the catalog's, none of which change.
type kubeEvents struct{ k *kubeevent.Reporter }

func (c kubeEvents) consume(e *emitted) {
	ev, g, p := e.ev, e.g, e.ev.Pod
	if g != nil && g.RemotePod != nil {
		c.k.Report(toRemotePod(ev, g))
		return
	}
	if e.expected || ev.NodePort || p == nil || p.UID == "" {
		return // not a pod's failure, or one its program makes on purpose
	}
	count := int32(min(1+ev.Suppressed, 1<<30))
	if p.Name == "" || p.Namespace == "" || ev.PodNamesUnresolved != "" {
		c.k.Unnamed(count) // a pod's failure, but no Pod to attach the Event to
		return
	}
	f := kubeevent.Failure{PodUID: p.UID, PodName: p.Name, Namespace: p.Namespace, Count: count,
		At: ev.Time, Syscall: ev.Syscall.String(), Errno: decode.ErrnoName(ev.Errno)}
	addr := &ev.Remote
	f.Action = "Connect"
	if ev.Syscall == decode.Bind {
		addr, f.Action = &ev.Local, "Bind"
	}
	if addr.Valid && addr.IP.IsValid() {
		f.Dest = addr.IP
	}
	f.Reason = reasonOf(ev, g)
	if g != nil && g.Err == "" {
		f.Verdict = g.Verdict
		if len(g.Fix) > 0 {
			f.Fix = g.Fix[0]
		}
	}
	if g != nil && g.Meaning != "" { // the diagnosis's own, as in the JSON's explain.meaning
		f.Meaning = g.Meaning
	} else if e.x != nil && e.x.Meaning != nil {
		f.Meaning = e.x.Meaning.Meaning
	}
	c.k.Report(f)
}

// toRemotePod is the Event on the pod a host process connected to from a
// source port in the NodePort range (the diagnosis named it by the
// destination's address): the kubelet's probe of that pod, most often,
// whose Unhealthy Event it then sits beside. It allocates, as such
// connects are few: a node whose range keeps clear of NodePorts has none.
func toRemotePod(ev *decode.Event, g *diagnose.Diagnosis) kubeevent.Failure {
	rp := g.RemotePod
	who := fmt.Sprintf("pid %d (%s) on the node", ev.PID, ev.Comm)
	if string(ev.Comm) == "kubelet" {
		who = fmt.Sprintf("the kubelet (pid %d), probing this pod or running its lifecycle hook,", ev.PID)
	}
	what := "connected"
	if ev.Errno != 0 {
		what = "failed to connect (" + decode.ErrnoName(ev.Errno) + ")"
	}
	f := kubeevent.Failure{PodUID: rp.UID, PodName: rp.Name, Namespace: rp.Namespace, Reason: kubeevent.ReasonNodePortSource,
		Action: "Connect", Dest: ev.Remote.IP, Count: int32(min(1+ev.Suppressed, 1<<30)), At: ev.Time,
		Verdict: fmt.Sprintf("%s %s to it at %s from source port %d: %s", who, what, ev.Remote.IP, ev.Local.IP.Port(), g.Verdict)}
	if len(g.Fix) > 0 {
		f.Fix = g.Fix[0]
	}
	return f
}

// reasonOf names the kind of failure. Exhaustion is claimed only when the
// port model found no port for the call (a connect() toward the
// destination, a port-0 bind(), a UDP socket's autobind).
func reasonOf(ev *decode.Event, g *diagnose.Diagnosis) string {
	switch {
	case g != nil && g.Exhausted:
		return kubeevent.ReasonExhausted
	case ev.Errno == decode.EADDRNOTAVAIL:
		return kubeevent.ReasonAddrNotAvail
	case ev.Errno == decode.EADDRINUSE:
		return kubeevent.ReasonAddrInUse
	case ev.Syscall == decode.Connect:
		return kubeevent.ReasonConnect
	}
	return kubeevent.ReasonBind
}

// foldedCollector is eaddr_kube_events_folded_total: failures counted in
// their pod's Event for destinations past its share.
func foldedCollector(k *kubeevent.Reporter) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_kube_events_folded_total",
		Help: "Failures of pods counted in their pod's FailedTowardOtherDestinations Event (--kube-events: a pod has Events of their own for 8 destinations at most at once), not in one of their own."},
		func() float64 { return float64(k.Stats().Folded) })
}

// runKubeEvents runs the reporter beside the trace; the returned stop
// ends it, letting it send what it can within a second.
func runKubeEvents(k *kubeevent.Reporter, met *metrics, log *slog.Logger) (stop func()) {
	k.SetLogger(log)
	if met != nil {
		met.kubeEvents(k)
		met.reg.MustRegister(foldedCollector(k))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Run(ctx)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
