package pipeline

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The series of portMetrics: made on first use while under the cap,
// removed with their netns. Callers hold p.mu.

// entry is the netns's series, with these pod labels: series made under
// other labels are removed first.
func (p *portMetrics) entry(inode uint64, namespace, pod string) *netnsSeries {
	e := p.byNetNS[inode]
	if e != nil && (e.namespace != namespace || e.pod != pod) {
		p.drop(inode, e)
		e = nil
	}
	if e == nil {
		e = &netnsSeries{netns: strconv.FormatUint(inode, 10), namespace: namespace, pod: pod, dests: map[string]prometheus.Gauge{}}
		p.byNetNS[inode] = e
	}
	return e
}

// gauge is *g, made from vec if under the cap; past it, a gauge that no
// registry sees, and the cut is counted.
func (p *portMetrics) gauge(g *prometheus.Gauge, vec *prometheus.GaugeVec, e *netnsSeries) prometheus.Gauge {
	if *g != nil {
		return *g
	}
	if p.series >= p.max {
		p.cut.Inc()
		return discard
	}
	p.series++
	*g = vec.WithLabelValues(e.netns, e.namespace, e.pod)
	return *g
}

// dest is the in-use gauge toward dest; nil past the cap (counted).
func (p *portMetrics) dest(e *netnsSeries, dest string) prometheus.Gauge {
	if g, ok := e.dests[dest]; ok {
		return g
	}
	if p.series >= p.max {
		p.cut.Inc()
		return nil
	}
	p.series++
	g := p.inUse.WithLabelValues(e.netns, e.namespace, e.pod, dest)
	e.dests[dest] = g
	return g
}

// drop removes every series of the netns.
func (p *portMetrics) drop(inode uint64, e *netnsSeries) {
	for dest := range e.dests {
		p.inUse.DeleteLabelValues(e.netns, e.namespace, e.pod, dest)
		p.series--
	}
	if e.usable != nil {
		p.usable.DeleteLabelValues(e.netns, e.namespace, e.pod)
		p.series--
	}
	if e.all != nil {
		p.all.DeleteLabelValues(e.netns, e.namespace, e.pod)
		p.series--
	}
	delete(p.byNetNS, inode)
}

// discard takes the values of series past the cap.
var discard = prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_discarded", Help: "never registered"})
