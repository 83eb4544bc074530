package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/tracer"
)

// metrics are eaddr's Prometheus series. Label sets are capped: past
// maxSeries, new namespace/pod pairs go to the series labelled "other";
// the port series have a cap of their own (portMetrics).
type metrics struct {
	reg       *prometheus.Registry
	errors    *prometheus.CounterVec
	port      *portMetrics // eaddr_ephemeral_ports_*, from diagnoses and the sampler
	maxSeries int

	errSeries map[errKey]prometheus.Counter

	lost         atomic.Uint64                       // kernel drops, set by the trace loop
	asyncUnseen  atomic.Uint64                       // pending connects whose end no program saw
	skipped      [len(tracer.Programs)]atomic.Uint64 // runs the kernel skipped, by program
	dropped      atomic.Uint64                       // events not written whole to stdout
	suppressed   atomic.Uint64                       // events held back by --rate-limit
	limitEvicted atomic.Uint64                       // rate limit keys the kernel's LRU dropped
	events       atomic.Uint64
	healthy      atomic.Bool
	// The reader's last return from the ring buffer (UnixNano), and how
	// long it may stay away before /healthz says it is stalled.
	readAt, stallAfter atomic.Int64

	// Attribution: events a filter could not decide (pod or cgroup not
	// known), CRI calls that failed or timed out, and the runtime's health
	// (why it is down, "" while it answers; read by /healthz).
	filteredUnresolved atomic.Uint64
	criFailures        atomic.Uint64
	criDown            atomic.Pointer[string]

	// Binaries of failing programs not analysed: past explain's bounds;
	// not started (queue full, file system stuck); no file at their path
	// was the executable. Analyses stuck in a read now.
	binariesGivenUp, binariesSkipped, binariesMismatched atomic.Uint64
	binariesStuck                                        atomic.Int64

	// The metrics server's listener (serve), for its connection counts.
	conns atomic.Pointer[limitListener]

	// Cache sizes, sampled by the trace loop (the caches are not safe to
	// read from the HTTP goroutine).
	caches atomic.Pointer[Caches]
}

// Size is the entries of one bounded cache and its bound.
type Size struct{ Len, Cap int }

// Caches are the bounded caches of the trace loop, by name.
type Caches struct {
	CgroupPaths, PodsByCgroup, PodsByNetNS, PodsByPID, Binaries Size
	Diagnoses, NetNSHandles, RateLimitKeys, CRIIDs, Processes   Size
	OutputBatches                                               Size // stdout's queue: 64 KiB each
}

// cacheSeries names each cache in eaddr_cache_entries and _capacity.
var cacheSeries = []struct {
	name string
	size func(*Caches) Size
}{
	{"cgroup_paths", func(c *Caches) Size { return c.CgroupPaths }},
	{"pods_by_cgroup", func(c *Caches) Size { return c.PodsByCgroup }},
	{"pods_by_netns", func(c *Caches) Size { return c.PodsByNetNS }},
	{"pods_by_pid", func(c *Caches) Size { return c.PodsByPID }},
	{"binaries", func(c *Caches) Size { return c.Binaries }},
	{"diagnoses", func(c *Caches) Size { return c.Diagnoses }},
	{"netns_handles", func(c *Caches) Size { return c.NetNSHandles }},
	{"rate_limit_keys", func(c *Caches) Size { return c.RateLimitKeys }},
	{"cri_ids", func(c *Caches) Size { return c.CRIIDs }},
	{"processes", func(c *Caches) Size { return c.Processes }},
	{"output_batches", func(c *Caches) Size { return c.OutputBatches }},
}

type errKey struct {
	sys            decode.Syscall
	errno          int
	namespace, pod string
}

// newMetrics makes the series; noDest: the port series without their
// destinations (--metrics-no-destination).
func newMetrics(maxSeries, maxPortSeries int, noDest bool) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), maxSeries: maxSeries,
		errSeries: map[errKey]prometheus.Counter{}, port: newPortMetrics(maxPortSeries, noDest)}
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eaddr_errors_total",
		Help: "Failed connect()/bind() calls the kernel reported and the filters kept, by syscall, errno and pod, those --rate-limit held back from the output included; calls the full ring could not report are in eaddr_lost_events_total (namespace and pod are empty outside pods; \"other\" past --metrics-max-series).",
	}, []string{"syscall", "errno", "namespace", "pod"})
	for _, cs := range cacheSeries {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_cache_entries", Help: "Entries in one of eaddr's caches; output_batches: the 64 KiB buffers stdout's queue has made (when stdout fell behind; kept).", ConstLabels: prometheus.Labels{"cache": cs.name}},
				func() float64 { return float64(m.cacheSize(cs.size).Len) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_cache_capacity", Help: "The most entries that cache keeps (output_batches: the queue's depth).", ConstLabels: prometheus.Labels{"cache": cs.name}},
				func() float64 { return float64(m.cacheSize(cs.size).Cap) }))
	}
	m.reg.MustRegister(m.skippedCollectors()...)
	m.reg.MustRegister(m.serverCollectors()...)
	m.reg.MustRegister(m.binaryCollectors()...)
	m.reg.MustRegister(m.port.collectors()...)
	m.reg.MustRegister(m.errors,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_lost_events_total",
			Help: "Events the kernel dropped because the ring buffer was full.",
		}, func() float64 { return float64(m.lost.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_async_unseen_total",
			Help: "Non-blocking connects (--async) whose end the kernel did not show eaddr's programs, and whose error their program had read by the time the socket was destroyed: failures whose errno and event are lost. No skipped run is counted for them (eaddr_bpf_runs_skipped_total).",
		}, func() float64 { return float64(m.asyncUnseen.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_dropped_events_total",
			Help: "Events read but not written to stdout: its queue was full, its reader went away, or it did not take them before shutdown. Only whole lines are written.",
		}, func() float64 { return float64(m.dropped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_suppressed_events_total",
			Help: "Failures held back in the kernel by --rate-limit (filtered ones excluded); the next event of the same key carries their count.",
		}, func() float64 { return float64(m.suppressed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_events_total",
			Help: "Failures the kernel reported: read from the ring buffer, or held back there by --rate-limit.",
		}, func() float64 { return float64(m.events.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_rate_limit_keys_evicted_total",
			Help: "Rate limit keys the kernel dropped to make room (it keeps 16384): failures held back for them since the last read (each second) are counted in eaddr_suppressed_events_total but in no pod's eaddr_errors_total.",
		}, func() float64 { return float64(m.limitEvicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_filtered_unresolved_total",
			Help: "Events dropped by --cgroup/--namespace/--pod/--container/--selector because their cgroup or pod was not known, so the filter could not decide.",
		}, func() float64 { return float64(m.filteredUnresolved.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_cri_failures_total",
			Help: "Calls to the container runtime (CRI) that failed or timed out; events then carry pod UIDs and container IDs without names.",
		}, func() float64 { return float64(m.criFailures.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_binaries_given_up_total",
			Help: "Binaries of failing programs that eaddr did not analyse because they were past its bounds on one binary (header and section counts, table and string sizes, bytes read, one second): their events say why in explain.client_unknown. Counted once per binary looked up.",
		}, func() float64 { return float64(m.binariesGivenUp.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_cri_up", Help: "1 while the container runtime answers eaddr's CRI calls (pod names), 0 while it does not or there is none."},
			func() float64 {
				if p := m.criDown.Load(); p != nil && *p != "" {
					return 0
				}
				return 1
			}),
		collectors.NewGoCollector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_up", Help: "1 while the BPF programs are attached and the ring is read (/healthz answers 200)."},
			func() float64 {
				if code, _ := m.health(time.Now()); code == http.StatusOK {
					return 1
				}
				return 0
			}),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// skippedCollectors are eaddr_bpf_runs_skipped_total, a series per program.
func (m *metrics) skippedCollectors() []prometheus.Collector {
	var cs []prometheus.Collector
	for i, name := range tracer.Programs {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "eaddr_bpf_runs_skipped_total",
			Help:        "Runs of eaddr's BPF program the kernel skipped, as it was already running on that CPU (for the syscall programs: any kprobe or tracepoint program was): a skipped exit_connect or exit_bind may have been a failure; what a skipped async_state records, async_error records again. Counted by the kernel for the socket programs (async_*) on every kernel eaddr runs on, for the syscall ones (exit_*) by 6.12, not by 6.1 (there a 0 is no proof).",
			ConstLabels: prometheus.Labels{"program": name},
		}, func() float64 { return float64(m.skipped[i].Load()) }))
	}
	return cs
}

// serverCollectors count the metrics server's own connections.
func (m *metrics) serverCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_metrics_connections_refused_total",
			Help: fmt.Sprintf("Connections to --metrics-addr closed as soon as they were accepted: %d were open already, or %d from the same address (a scraper among them sees its scrape fail; docs/alerts.md).",
				defaultServerLimits.MaxConns, defaultServerLimits.MaxConnsPerAddr),
		}, func() float64 {
			return float64(m.connsOf(func(l *limitListener) int64 { return int64(l.refused.Load()) }))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_metrics_connections_open", Help: "Connections to --metrics-addr open now (this scrape's among them)."},
			func() float64 { return float64(m.connsOf(func(l *limitListener) int64 { return l.open.Load() })) }),
	}
}

// binaryCollectors are the counts of the binary analysis beside the reader
// (binworker.go) besides eaddr_binaries_given_up_total.
func (m *metrics) binaryCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_binaries_skipped_total",
			Help: "Binaries of failing programs whose analysis eaddr did not start: 64 were already waiting for its 4 analysers, or a read of another file on the same file system had not returned (eaddr_binary_analyses_stuck); their events say why in explain.client_unknown, and the binary is asked again 10 s later.",
		}, func() float64 { return float64(m.binariesSkipped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eaddr_binaries_mismatched_total",
			Help: "Binaries of failing programs that had exited that eaddr did not analyse because no file at their path in their root was the executable the kernel recorded (another device or inode: replaced, moved or swapped); such a file is never read. Counted once per binary looked up.",
		}, func() float64 { return float64(m.binariesMismatched.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eaddr_binary_analyses_stuck",
			Help: "Analyses of a failing program's binary in a read or open that has not returned for 5 s or more: its file system (a FUSE daemon, an NFS server) does not answer. Each holds one of eaddr's 4 analysers; the reader and other events go on, and no other file of that file system is read meanwhile."},
			func() float64 { return float64(m.binariesStuck.Load()) }),
	}
}

// health is /healthz's status at now, and why when it is not 200: 200
// while the programs are attached and the reader comes back from the ring,
// which it does at least every flush interval (or second) even with no
// event; 503 before attach, after detach, and when it has not come back
// for stallAfter.
func (m *metrics) health(now time.Time) (int, string) {
	if !m.healthy.Load() {
		return http.StatusServiceUnavailable, "not attached"
	}
	stall := time.Duration(m.stallAfter.Load())
	if away := now.Sub(time.Unix(0, m.readAt.Load())); stall > 0 && away > stall {
		return http.StatusServiceUnavailable, fmt.Sprintf("reader stalled: the ring buffer was last read %v ago (more than %v): failures are not being written, and those the full ring cannot take are lost (eaddr_lost_events_total)",
			away.Round(time.Second), stall)
	}
	return http.StatusOK, ""
}

// labelKey is the series of ev: its pod, or empty outside pods.
func labelKey(ev *decode.Event) errKey {
	k := errKey{sys: ev.Syscall, errno: ev.Errno}
	if ev.Pod != nil {
		k.namespace, k.pod = ev.Pod.Namespace, ev.Pod.Name
		if k.pod == "" { // no runtime: the UID still tells pods apart
			k.pod = ev.Pod.UID
		}
	}
	return k
}

// count counts one failure in eaddr_errors_total and returns its series,
// in which the failures of its key that --rate-limit holds back in the
// kernel are counted too (nil for NodePort reports, which are not
// failures). It does not allocate once its series exists.
func (m *metrics) count(ev *decode.Event) prometheus.Counter {
	if ev.NodePort {
		return nil
	}
	k := labelKey(ev)
	c, ok := m.errSeries[k]
	if !ok {
		if len(m.errSeries) >= m.maxSeries {
			k.namespace, k.pod = "other", "other"
			c, ok = m.errSeries[k]
		}
		if !ok {
			c = m.errors.WithLabelValues(ev.Syscall.String(), decode.ErrnoName(ev.Errno), k.namespace, k.pod)
			m.errSeries[k] = c
		}
	}
	c.Inc()
	return c
}

// serverLimits bound what a client can hold of the metrics server: how
// long a request may take to arrive and its answer to leave, how long a
// kept-alive connection may wait for its next request, and how many
// connections are served at once, in all and from one address (past
// those, limitListener closes them and counts them).
type serverLimits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxConns, MaxConnsPerAddr     int
}

// defaultServerLimits: a scrape is a small GET and an answer of some
// hundred KB gathered in milliseconds. Write stays above Prometheus's
// default scrape_timeout (10 s), so that eaddr never cuts a scrape its
// scraper still waits for. Idle is longer than the common scrape
// intervals (15 s, 30 s, 1 m), so that a scraper's kept-alive connection
// is not closed under it as it sends its next request. 64 connections
// (8 from one address: a Prometheus pair, probes, a person with curl)
// hold about 1 MiB, where the issue measured 11 KiB for each of 1,500.
var defaultServerLimits = serverLimits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 15 * time.Second,
	Idle: 90 * time.Second, MaxConns: 64, MaxConnsPerAddr: 8}

// serve runs the metrics endpoint until ctx is done, within lim. /healthz
// answers 200 while the tracer is attached and reading.
func (m *metrics) serve(ctx context.Context, addr string, lim serverLimits, log *slog.Logger) (string, error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	ln := newLimitListener(inner, lim.MaxConns, lim.MaxConnsPerAddr)
	m.conns.Store(ln)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if code, why := m.health(time.Now()); code != http.StatusOK {
			http.Error(w, why, code)
			return
		}
		if p := m.criDown.Load(); p != nil && *p != "" {
			// Tracing works; only pod names are missing: still healthy.
			fmt.Fprintf(w, "ok\ncontainer runtime: not answering, events carry pod UIDs and container IDs only: %s\n", *p)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: lim.ReadHeader, ReadTimeout: lim.Read,
		WriteTimeout: lim.Write, IdleTimeout: lim.Idle}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	return ln.Addr().String(), nil
}

// connsOf reads a count of the metrics server's listener (0 before serve).
func (m *metrics) connsOf(count func(*limitListener) int64) int64 {
	if l := m.conns.Load(); l != nil {
		return count(l)
	}
	return 0
}

// cacheSize reads one cache's size from the last sample.
func (m *metrics) cacheSize(size func(*Caches) Size) Size {
	if c := m.caches.Load(); c != nil {
		return size(c)
	}
	return Size{}
}

// kubeEvents registers the Events reporter's counters (--kube-events).
func (m *metrics) kubeEvents(k *kubeevent.Reporter) {
	calls := func(result string, v func(kubeevent.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_kube_event_calls_total",
			Help:        "Calls to the API server for Kubernetes Events (--kube-events), by result: created, updated, failed.",
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { return float64(v(k.Stats())) })
	}
	m.reg.MustRegister(
		calls("created", func(s kubeevent.Stats) uint64 { return s.Created }),
		calls("updated", func(s kubeevent.Stats) uint64 { return s.Updated }),
		calls("failed", func(s kubeevent.Stats) uint64 { return s.Errors }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_kube_events_dropped_total",
			Help: "Failures of pods that reached no Kubernetes Event (--kube-events): the reporter's queue was full, creating the Event failed, or they were unsent at stop."},
			func() float64 { return float64(k.Stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_kube_events_unnamed_total",
			Help: "Failures of pods that reached no Kubernetes Event (--kube-events) because the pod's name was not known: the container runtime had not named it."},
			func() float64 { return float64(k.Stats().Unnamed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eaddr_kube_port_warnings_dropped_total",
			Help: "Port warnings (a sample that found a pod's netns at or above --warn toward a destination, before any failure) that reached no EphemeralPortsNearlyExhausted Event (--kube-events): the pod's name was not known, the reporter's queue was full, creating the Event failed, or they were unsent at stop. No failures: not in eaddr_kube_events_dropped_total."},
			func() float64 { return float64(k.Stats().WarningsDropped) }))
}
