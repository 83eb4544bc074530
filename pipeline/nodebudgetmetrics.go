package pipeline

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// budgetCollector exports the node's budgets of the last sample. A sample
// is published whole (one pointer stored) and a scrape reads one: it sees
// every series of one sample or of the next, never eaddr_snat_entries of
// a destination without its eaddr_snat_ports, nor a family emptied between
// two samples. (Gauge vectors reset and refilled in place showed a scrape
// exactly that: one test scraped entries 4 and no ports.) A scrape never
// waits on a sample.
type budgetCollector struct {
	last                                  atomic.Pointer[budgetView]
	entries, ports, sources, ctUse, ctMax *prometheus.Desc
}

// budgetView is what one sample exports: its SNAT budgets, and the
// conntrack table's use (nil: not read yet).
type budgetView struct {
	snat []diagnose.SNATBudget
	ct   *diagnose.ConntrackUse
}

func newBudgetCollector() *budgetCollector {
	key := []string{"egress", "destination", "protocol"}
	return &budgetCollector{
		entries: prometheus.NewDesc("eaddr_snat_entries",
			"Conntrack entries of the node's netns whose source NAT (MASQUERADE) holds a port of the egress address toward the destination (after DNAT), at the last port sample, for the destinations holding the most.", key, nil),
		ports: prometheus.NewDesc("eaddr_snat_ports",
			"Ports the MASQUERADE rule that chose them can give toward that destination from that egress address (its --to-ports range, 1024-65535 without one): eaddr_snat_entries of it is exhaustion.", key, nil),
		sources: prometheus.NewDesc("eaddr_snat_source_entries",
			"Of eaddr_snat_entries, those of one original source (a pod's address), for the 8 sources holding the most, with its pod when one of this node has the address: each pod's share.",
			append(key, "source", "namespace", "pod"), nil),
		ctUse: prometheus.NewDesc("eaddr_conntrack_entries",
			"Entries of the node netns's conntrack table at the last port sample (CTNETLINK, as conntrack -C).", nil, nil),
		ctMax: prometheus.NewDesc("eaddr_conntrack_max",
			"net.netfilter.nf_conntrack_max: past it, conntrack makes no entry and drops new flows.", nil, nil),
	}
}

// publish makes v what scrapes see.
func (c *budgetCollector) publish(v *budgetView) { c.last.Store(v) }

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.entries, c.ports, c.sources, c.ctUse, c.ctMax} {
		ch <- d
	}
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.last.Load()
	if v == nil {
		return
	}
	if v.ct != nil {
		ch <- prometheus.MustNewConstMetric(c.ctUse, prometheus.GaugeValue, float64(v.ct.Count))
		ch <- prometheus.MustNewConstMetric(c.ctMax, prometheus.GaugeValue, float64(v.ct.Max))
	}
	for i := range v.snat {
		s := &v.snat[i]
		l := []string{s.Egress.String(), s.Dst.String(), decode.ProtocolName(uint16(s.Proto))}
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries), l...)
		ch <- prometheus.MustNewConstMetric(c.ports, prometheus.GaugeValue, float64(s.Ports()), l...)
		for _, h := range s.Holders {
			ns, pod := "", ""
			if h.Pod != nil {
				ns, pod = h.Pod.Namespace, h.Pod.Name
			}
			ch <- prometheus.MustNewConstMetric(c.sources, prometheus.GaugeValue, float64(h.Entries), append(l, h.Addr.String(), ns, pod)...)
		}
	}
}
