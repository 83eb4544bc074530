package pipeline

import (
	"log/slog"
	"net/netip"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// The node's SNAT and conntrack budgets before a failure (issue 37): at
// each port sample, the node's conntrack table is walked over netlink and
// counted as it is read (nodeport.CountSNAT: never held), and the gauges
// below are set for the nodeBudgetTop destinations holding the most SNAT
// ports. sampled is the one call the sampler makes.

// nodeBudgetKeys bounds the SNAT keys (egress, destination) a walk counts;
// nodeBudgetTop is how many get series.
const (
	nodeBudgetKeys = 4096
	nodeBudgetTop  = 10
)

type nodeBudget struct {
	host  uint64
	log   *slog.Logger
	podOf func(netip.Addr) (*decode.Pod, bool) // kube.Resolver.PodByIP; nil: not named
	mu    sync.Mutex                           // one sample at a time

	entries, ports, holder *prometheus.GaugeVec
	ctEntries, ctMax       prometheus.Gauge
	cloudLimit             prometheus.Gauge
	cloudSet               bool
}

func newNodeBudget(host uint64, cloudNATLimit float64, log *slog.Logger) *nodeBudget {
	key := []string{"egress", "destination", "protocol"}
	b := &nodeBudget{host: host, log: log,
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_snat_entries",
			Help: "Conntrack entries of the node's netns whose source NAT (MASQUERADE) holds a port of the egress address toward the destination (after DNAT), at the last port sample, for the destinations holding the most."}, key),
		ports: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_snat_ports",
			Help: "Ports the MASQUERADE rule that chose them can give toward that destination from that egress address (its --to-ports range, 1024-65535 without one): eaddr_snat_entries of it is exhaustion."}, key),
		holder: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "eaddr_snat_top_source_entries",
			Help: "Of eaddr_snat_entries, those of the original source (a pod's address) holding the most, with its pod when one of this node has the address."}, append(key, "source", "namespace", "pod")),
		ctEntries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_conntrack_entries",
			Help: "Entries of the node netns's conntrack table at the last port sample (CTNETLINK, as conntrack -C)."}),
		ctMax: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_conntrack_max",
			Help: "net.netfilter.nf_conntrack_max: past it, conntrack makes no entry and drops new flows."}),
		cloudLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_cloud_nat_limit",
			Help: "--cloud-nat-limit: the connections a cloud NAT gives toward one destination (AWS NAT gateway: 55000), for the alert that sums eaddr_snat_entries over the nodes behind it."}),
	}
	if cloudNATLimit > 0 {
		b.cloudLimit.Set(cloudNATLimit)
		b.cloudSet = true
	}
	return b
}

// nodeBudgetSampler registers the budgets' gauges and returns the call
// the port sampler makes per sample.
func (r *traceRun) nodeBudgetSampler() func(*PortSample) {
	b := newNodeBudget(r.pods.HostNetNS, r.c.CloudNATLimit, r.log)
	b.podOf = r.names.PodByIP
	r.met.reg.MustRegister(b.collectors()...)
	return b.sampled
}

func (b *nodeBudget) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{b.entries, b.ports, b.holder, b.ctEntries, b.ctMax}
	if b.cloudSet {
		cs = append(cs, b.cloudLimit)
	}
	return cs
}

// sampled takes one sample of the node's budgets (the port sample itself
// is not used: the sampler calls it once per sample).
func (b *nodeBudget) sampled(*PortSample) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ns, err := netdiag.OpenNetns(b.host)
	if err != nil {
		b.log.Debug("node budget: cannot enter the node's netns", "err", err)
		return
	}
	defer ns.Close()
	var count *nodeport.SNATCount
	var rules []nodeport.Masquerade
	var cerr error
	ns.Do(func() error {
		if n, max, err := nodeport.ConntrackUse(); err == nil {
			b.ctEntries.Set(float64(n))
			b.ctMax.Set(float64(max))
		}
		count, cerr = nodeport.CountSNAT(nodeBudgetKeys, nil)
		rules, _ = nodeport.ReadMasquerade()
		return nil
	})
	if cerr != nil {
		b.log.Debug("node budget: cannot walk the conntrack table", "err", cerr)
		return
	}
	b.set(count, rules)
}

// set replaces the SNAT series with the top destinations of count.
func (b *nodeBudget) set(c *nodeport.SNATCount, rules []nodeport.Masquerade) {
	keys := make([]nodeport.SNATKey, 0, len(c.ByKey))
	for k := range c.ByKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c.ByKey[keys[i]] > c.ByKey[keys[j]] })
	keys = keys[:min(len(keys), nodeBudgetTop)]
	top := map[nodeport.SNATKey]nodeport.SNATSource{}
	for src, n := range c.BySource {
		if best, ok := top[src.SNATKey]; !ok || n > c.BySource[best] {
			top[src.SNATKey] = src
		}
	}
	b.entries.Reset()
	b.ports.Reset()
	b.holder.Reset()
	for _, k := range keys {
		l := []string{k.Egress.String(), k.Dst.String(), decode.ProtocolName(uint16(k.Proto))}
		b.entries.WithLabelValues(l...).Set(float64(c.ByKey[k]))
		lo, hi := masqRangeOf(rules, c.Ports[k])
		b.ports.WithLabelValues(l...).Set(float64(hi - lo + 1))
		src := top[k]
		ns, pod := "", ""
		if p, ok := b.pod(src.Src); ok {
			ns, pod = p.Namespace, p.Name
		}
		b.holder.WithLabelValues(append(l, src.Src.String(), ns, pod)...).Set(float64(c.BySource[src]))
	}
}

func (b *nodeBudget) pod(a netip.Addr) (*decode.Pod, bool) {
	if b.podOf == nil || !a.IsValid() {
		return nil, false
	}
	p, ok := b.podOf(a)
	return p, ok && p.Name != ""
}

// masqRangeOf is the range of the narrowest MASQUERADE rule holding both
// chosen ports (span), else MASQUERADE's default.
func masqRangeOf(rules []nodeport.Masquerade, span [2]uint16) (lo, hi int) {
	if m, ok := nodeport.Narrowest(rules, span[0], span[1]); ok {
		return m.Ports()
	}
	return nodeport.DefaultMasqLo, nodeport.DefaultMasqHi
}
