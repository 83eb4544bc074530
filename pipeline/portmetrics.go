package pipeline

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/ports"
)

// portMetrics are the port gauges, per netns: set by the sampler for its
// top destinations, and by each diagnosis for the failing one. The trace
// loop (diagnoses) and the sampler's goroutine both write them, under mu.
// At most max series exist; the ones past it are not made, and counted in
// eaddr_port_series_cut_total.
type portMetrics struct {
	mu                 sync.Mutex
	inUse, usable, all *prometheus.GaugeVec
	cut, skipped       prometheus.Counter
	took, interval     prometheus.Gauge
	scratch            []byte // diagnosed's destination, under mu
	max, series        int
	byNetNS            map[uint64]*netnsSeries
	// exported is what is registered of inUse: inUse itself, or without
	// the destinations, a busiestCollector over it.
	exported prometheus.Collector
}

// netnsSeries are one netns's series and their labels.
type netnsSeries struct {
	netns, namespace, pod string
	usable, all           prometheus.Gauge // nil: not made (yet, or cut)
	dests                 map[string]prometheus.Gauge
}

// inUseHelp is eaddr_ephemeral_ports_in_use's help, and without the
// destinations (--metrics-no-destination) noDestHelp's too.
const (
	inUseHelp  = "Ephemeral ports a connect() toward the destination (ip:port) could not have, per netns and pod: held toward it or for every destination, by the port model of the diagnosis. Set for the --ports-top busiest destinations at each --ports-interval sample, and for the failing destination at each diagnosis (destination empty for a bind(): ports held at all)."
	noDestHelp = " With --metrics-no-destination, one series per netns instead of one per destination: the largest, labelled destination=\"" + busiestDestination + "\"."
)

// newPortMetrics makes the port series, at most max of them; noDest:
// without the destinations (--metrics-no-destination).
func newPortMetrics(max int, noDest bool) *portMetrics {
	labels := []string{"netns", "namespace", "pod"}
	p := &portMetrics{max: max, byNetNS: map[uint64]*netnsSeries{},
		inUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_ephemeral_ports_in_use", Help: inUseHelp},
			append(labels, "destination")),
		usable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_ephemeral_ports_usable",
			Help: "Ports of net.ipv4.ip_local_port_range not reserved, per netns and pod, at the last sample or diagnosis."}, labels),
		all: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_ephemeral_ports_held_for_all",
			Help: "Ports of the range that no connect() can have, whatever the destination (bound-only sockets, listeners, sockets that bind() before connect(), their orphans), per netns and pod, at the last sample."}, labels),
		cut: prometheus.NewCounter(prometheus.CounterOpts{Name: "eaddr_port_series_cut_total",
			Help: "Port series (eaddr_ephemeral_ports_*) not made because --ports-max-series were there: counted each time one is wanted."}),
		took: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_port_sample_seconds",
			Help: "How long the port sampler's last sample of every netns took."}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_port_sample_interval_seconds",
			Help: "The wait between port samples: --ports-interval, or 100 times the last sample's time when that is longer, so that the sampler takes at most 1% of a core."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "eaddr_port_netns_skipped_total",
			Help: "Network namespaces the port sampler could not enter or read (gone before it got there, or their sockets not listed): left out of that sample, their series removed."}),
	}
	p.exported = p.inUse
	if noDest {
		p.exported = busiestCollector{vec: p.inUse, desc: prometheus.NewDesc("eaddr_ephemeral_ports_in_use", inUseHelp+noDestHelp,
			append(labels, "destination"), nil)}
	}
	return p
}

func (p *portMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.exported, p.usable, p.all, p.cut, p.skipped, p.took, p.interval}
}

// diagnosed sets the gauges of ev's netns from its diagnosis: the ports
// in use toward the failing destination, and the usable ones.
func (p *portMetrics) diagnosed(ev *decode.Event, g *diagnose.Diagnosis) {
	if ev.NodePort || g == nil || !g.Counted {
		return
	}
	k := labelKey(ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch = p.scratch[:0] // the destination, in a buffer kept: every event of a storm comes here
	if ev.Syscall == decode.Connect {
		p.scratch = ev.Remote.IP.AppendTo(p.scratch)
	}
	e := p.entry(uint64(ev.NetNS), k.namespace, k.pod)
	p.gauge(&e.usable, p.usable, e).Set(float64(g.Usable))
	d, ok := e.dests[string(p.scratch)] // no string made for the lookup
	if !ok {
		d = p.dest(e, string(p.scratch))
	}
	if d != nil {
		d.Set(float64(g.InUse))
	}
}

// sampled sets the gauges of every netns of s (next: the wait before the
// next sample) and removes the series of the netns not in it and of the
// destinations out of its top.
func (p *portMetrics) sampled(s *ports.Sample, next time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skipped.Add(float64(s.Skipped))
	p.took.Set(s.Took.Seconds())
	p.interval.Set(next.Seconds())
	seen := make(map[uint64]bool, len(s.NetNS))
	for i := range s.NetNS {
		n := &s.NetNS[i]
		if n.Error != "" {
			continue // not read: its series go
		}
		seen[n.Inode] = true
		var ns, pod string
		if n.Pod != nil {
			ns, pod = n.Pod.Namespace, n.Pod.Name
		}
		if old := p.byNetNS[n.Inode]; old != nil && pod == "" && !n.Host {
			ns, pod = old.namespace, old.pod // named by an event's attribution; the sampler does not know better
		}
		p.netnsSampled(p.entry(n.Inode, ns, pod), n)
	}
	for inode, e := range p.byNetNS {
		if !seen[inode] {
			p.drop(inode, e)
		}
	}
}

// netnsSampled sets one netns's gauges and removes its destinations out of
// its top.
func (p *portMetrics) netnsSampled(e *netnsSeries, n *diagnose.NetNSReport) {
	p.gauge(&e.usable, p.usable, e).Set(float64(n.Usable))
	p.gauge(&e.all, p.all, e).Set(float64(n.HeldForAll))
	top := make(map[string]bool, len(n.Destinations))
	for _, d := range n.Destinations {
		top[d.Remote] = true
	}
	for dest := range e.dests {
		if !top[dest] {
			p.inUse.DeleteLabelValues(e.netns, e.namespace, e.pod, dest)
			delete(e.dests, dest)
			p.series--
		}
	}
	for _, d := range n.Destinations {
		if g := p.dest(e, d.Remote); g != nil {
			g.Set(float64(d.Ports))
		}
	}
}
