package pipeline

import (
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/tracer"
)

// DefaultNodeDropRate is how many of the node's drops a second each CPU
// sends (--node-drop-rate): a SYN flood into a DROP rule is held back in
// the kernel and counted, not read.
const DefaultNodeDropRate = 200

// nodeDropsMax is how many flows the DropBook keeps (the latest).
const nodeDropsMax = 16384

// nodeDrops watches the node's drops of new flows' first packets
// (bpf/nodedrop.bpf.c) for the diagnosis of timeouts: its own ring, read
// on its own goroutine into the Diagnoser's DropBook, never on the
// failures' path.
type nodeDrops struct {
	nd    *tracer.NodeDrops
	book  *diagnose.DropBook
	clock *decode.BootClock
	log   *slog.Logger
	wg    sync.WaitGroup
	seen  *prometheus.CounterVec // reason, protocol
}

// wantsTimeouts: the trace reports connect()'s ETIMEDOUT, which the node's
// drops explain.
func wantsTimeouts(o *tracer.Options) bool {
	return tracer.WantsAsync(o) && (o.AllErrnos || slices.Contains(o.Errnos, int(unix.ETIMEDOUT)))
}

// openNodeDrops loads the node drop program, or says why timeouts are
// diagnosed without it and returns nil.
func openNodeDrops(rate float64, host uint64, log *slog.Logger) *nodeDrops {
	nd, err := tracer.NewNodeDrops(tracer.NodeDropOptions{Rate: rate})
	if err != nil {
		log.Warn("not watching the node's drops (tracepoint skb:kfree_skb): a timeout's diagnosis cannot say which layer dropped its SYNs", "err", err)
		return nil
	}
	n := &nodeDrops{nd: nd, clock: decode.NewBootClock(), log: log,
		seen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eaddr_node_drops_total",
			Help: "The first packets of new flows (a TCP SYN, a UDP packet without a confirmed conntrack entry) this node dropped and eaddr read, by the kernel's drop reason and protocol."},
			[]string{"reason", "protocol"})}
	n.book = diagnose.NewDropBook(nodeDropsMax)
	n.book.Ksyms = &netdiag.Kallsyms{}
	go n.book.Ksyms.Load() // a second on a slow node: before the first timeout's diagnosis, not in it
	n.book.Drained = nd.Drained
	n.book.Missed = func() uint64 {
		c, err := nd.Counts()
		if err != nil {
			return 0
		}
		return c.Held + c.Lost
	}
	if err := n.book.Watch(uint32(host)); err != nil {
		log.Info("conntrack's counters of the node's netns not read at start: its first drop will not say which moved", "err", err)
	}
	log.Info("watching the node's drops of new flows", "reasons", nd.Watched(), "rate_per_cpu", rate)
	return n
}

// watchNodeDrops gives the Diagnoser the node's drops, before its worker
// starts, and their counters to /metrics.
func (r *traceRun) watchNodeDrops(d *diagnose.Diagnoser, host uint64) {
	if r.nodeDrops = openNodeDrops(r.c.NodeDropRate, host, r.log); r.nodeDrops == nil {
		return
	}
	d.NodeDrops = r.nodeDrops.book
	if r.met != nil {
		r.met.reg.MustRegister(r.nodeDrops.collectors()...)
	}
}

// start reads drops until stop.
func (n *nodeDrops) start() (stop func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		var r tracer.NodeDropRecord
		for {
			err := n.nd.Read(&r)
			if errors.Is(err, tracer.ErrClosed) {
				return
			}
			if err != nil {
				n.log.Warn("reading the node's drops", "err", err)
				return
			}
			d := decode.DecodeNodeDrop(&r, n.nd.ReasonName, n.clock)
			n.count(d)
			n.book.Add(d)
		}
	}()
	return func() {
		n.nd.Stop()
		n.wg.Wait()
		n.nd.Close()
		n.book.Close()
	}
}

func (n *nodeDrops) count(d decode.NodeDrop) {
	n.seen.WithLabelValues(d.Reason, decode.ProtocolName(uint16(d.Orig.Proto))).Inc()
}

// collectors are the drops read, and those the kernel held back or lost
// (its per-CPU counters, summed at each scrape).
func (n *nodeDrops) collectors() []prometheus.Collector {
	missed := func(why string, of func(tracer.NodeDropCounts) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_node_drops_missed_total",
			Help:        "Drops of new flows' first packets eaddr did not read: held back by the per-CPU rate limit (--node-drop-rate) or lost with the ring full.",
			ConstLabels: prometheus.Labels{"why": why}}, func() float64 {
			c, err := n.nd.Counts()
			if err != nil {
				return 0
			}
			return float64(of(c))
		})
	}
	return []prometheus.Collector{n.seen,
		missed("rate_limit", func(c tracer.NodeDropCounts) uint64 { return c.Held }),
		missed("ring_full", func(c tracer.NodeDropCounts) uint64 { return c.Lost })}
}
