package pipeline

import (
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/ports"
)

// The node's SNAT and conntrack budgets before a failure (issue 37): at
// each port sample, the node's conntrack table is walked over netlink and
// counted as it is read (diagnose.ReadNodeBudgets: never held). With
// --metrics-addr, the gauges below are set for the nodeBudgetTop
// destinations holding the most SNAT ports, with each pod's share; with
// --kube-events, a destination at --warn percent or more of its SNAT range
// gets a Warning Event on the pod holding the most of it. sampled is the
// one call the sampler makes.

// nodeBudgetTop is how many destinations get series.
const nodeBudgetTop = 10

type nodeBudget struct {
	host  uint64
	log   *slog.Logger
	podOf func(netip.Addr) (*decode.Pod, bool) // kube.Resolver.PodByIP; nil: not named
	mu    sync.Mutex                           // one sample at a time
	// read is diagnose.ReadNodeBudgets; tests replace it.
	read func(host uint64, top int, podOf func(netip.Addr) (*decode.Pod, bool)) (*diagnose.NodeBudgets, error)

	met  bool // the gauges are registered (--metrics-addr)
	warn int  // with k: --warn
	k    reportSink

	gauges     *budgetCollector
	cloudLimit prometheus.Gauge
	cloudSet   bool
}

func newNodeBudget(host uint64, cloudNATLimit float64, log *slog.Logger) *nodeBudget {
	b := &nodeBudget{host: host, log: log, read: diagnose.ReadNodeBudgets, gauges: newBudgetCollector(),
		cloudLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "eaddr_cloud_nat_limit",
			Help: "--cloud-nat-limit: the connections a cloud NAT gives toward one destination (AWS NAT gateway: 55000), for the alert that sums eaddr_snat_entries over the nodes behind it."}),
	}
	if cloudNATLimit > 0 {
		b.cloudLimit.Set(cloudNATLimit)
		b.cloudSet = true
	}
	return b
}

// nodeBudgetSampler returns the call the port sampler makes per sample for
// the node's budgets, its gauges registered with --metrics-addr and its
// warnings sent with --kube-events; nil with neither.
func (r *traceRun) nodeBudgetSampler() func(*ports.Sample) {
	if r.met == nil && r.c.KubeEvents == nil {
		return nil
	}
	b := newNodeBudget(r.pods.HostNetNS, r.c.CloudNATLimit, r.log)
	b.podOf = r.names.PodByIP
	if r.met != nil {
		b.met = true
		r.met.reg.MustRegister(b.collectors()...)
	}
	if r.c.KubeEvents != nil {
		b.k, b.warn = r.c.KubeEvents, r.c.PortsWarn
	}
	return b.sampled
}

func (b *nodeBudget) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{b.gauges}
	if b.cloudSet {
		cs = append(cs, b.cloudLimit)
	}
	return cs
}

// sampled takes one sample of the node's budgets (the port sample itself
// is not used: the sampler calls it once per sample). A table not read
// leaves the SNAT series of the last sample, and its use when that was
// not read either.
func (b *nodeBudget) sampled(*ports.Sample) {
	b.mu.Lock()
	defer b.mu.Unlock()
	nb, err := b.read(b.host, nodeBudgetTop, b.podOf)
	if b.met {
		b.publish(nb, err)
	}
	if err != nil {
		b.log.Debug("node budget: cannot read the node's conntrack table", "err", err)
		return
	}
	if b.k != nil {
		b.warnings(nb.SNAT)
	}
}

// publish makes one sample's budgets what a scrape sees, all at once.
func (b *nodeBudget) publish(nb *diagnose.NodeBudgets, err error) {
	v := &budgetView{}
	if last := b.gauges.last.Load(); last != nil {
		*v = *last
	}
	if nb != nil && nb.Conntrack != nil {
		v.ct = nb.Conntrack
	}
	if err == nil {
		v.snat = nb.SNAT
	}
	b.gauges.publish(v)
}

// warnings sends, for each budget at --warn percent or more, a Warning
// Event on the pod holding the most of it. A top holder that is no pod
// eaddr knows by name (the runtime has not named it, or the address is no
// pod's of this node) gets none, counted as a warning that reached no
// Event: the Event is never put on the next holder instead.
func (b *nodeBudget) warnings(bs []diagnose.SNATBudget) {
	for i := range bs {
		s := &bs[i]
		if s.Percent() < b.warn {
			continue
		}
		top := s.Top()
		if top == nil || top.Pod == nil || top.Pod.UID == "" || top.Pod.Namespace == "" {
			b.k.UnnamedWarning()
			continue
		}
		verdict, fix := s.Warning()
		b.k.Report(kubeevent.Failure{PodUID: top.Pod.UID, PodName: top.Pod.Name, Namespace: top.Pod.Namespace,
			Reason: kubeevent.ReasonNodeSNATNearlyExhausted, Action: "SampleNodeSNAT", Dest: s.Dst,
			Verdict: verdict, Fix: strings.Join(fix, "; or "), Count: 1, At: time.Now()})
	}
}
