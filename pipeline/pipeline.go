package pipeline

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/pod/kube"
	"github.com/eaddr/eaddr/tracer"
)

// Config is what a trace does, from `eaddr trace`'s flags, checked.
type Config struct {
	// Output is the records' form: JSON lines (the zero value), or for a
	// person the text blocks or the table that Human renders.
	Output output.Format
	Human  output.Human
	Tracer tracer.Options // what the kernel reports
	Comm   string         // only this comm
	NetNS  []uint32       // only these netns (one is also the kernel's filter)
	Cgroup string         // only cgroup paths with this prefix
	Node   string         // the node's name in each record
	// Explain: 0 off, 1 short, 2 full (with every other client's wording).
	Explain     int
	CRIEndpoint string
	// NoPods: no traced process is in a pod (eaddr demo's own netns), so
	// a container runtime that cannot be asked is logged at debug level
	// only, even on a node with pods.
	NoPods           bool
	Flush            time.Duration // the longest an event waits in the ring
	MetricsAddr      string        // serve /metrics and /healthz here ("": off)
	MetricsMaxSeries int
	// MetricsNoDestination: the port series name no destination, one per
	// netns for the busiest (--metrics-no-destination).
	MetricsNoDestination bool
	// The port sampler (with MetricsAddr or KubeEvents): every
	// PortsInterval (0: off), the PortsTop busiest destinations of every
	// netns with a live process; at most PortsMaxSeries port series. With
	// KubeEvents, a pod whose netns holds PortsWarn percent or more of the
	// ports toward one of them gets an EphemeralPortsNearlyExhausted Event,
	// and the pod holding the most of the node's SNAT ports toward a
	// destination at PortsWarn percent of its range a
	// NodeSNATPortsNearlyExhausted one (nodebudget.go).
	PortsInterval                       time.Duration
	PortsTop, PortsMaxSeries, PortsWarn int
	SummaryEvery                        time.Duration // 0: no summary records
	Rate                                float64       // events per second per key; 0: no limit
	CgroupRate                          float64       // with Rate: events per second per cgroup, syscall and errno; 0: no limit
	// Pod filters.
	Namespace, Pod, Container string
	Selector                  map[string]string
	// DiagnoseEvery: one snapshot per key in this interval; 0: no diagnosis.
	DiagnoseEvery time.Duration
	// SocketIterators: read a netns's sockets for a diagnosis with the BPF
	// socket iterators (bind buckets, SO_REUSEADDR, TIME_WAIT stamps), not
	// sock_diag alone (--socket-iterators).
	SocketIterators bool
	// The longest an event waits for its pod's names from the runtime, and
	// for its netns snapshot (0: DefaultNamesWait, DefaultDiagnoseWait);
	// the shortest window in which a failure continues the previous
	// attempt of its thread (0: explain.RetryWindowNs; a client's own
	// longer window is kept).
	NamesWait, DiagnoseWait, RetryWindow time.Duration
	NodePortLo, NodePortHi               int
	// HostNetNS is the node's netns inode (--host-netns); 0: pid 1's, else
	// kthreadd's.
	HostNetNS uint64
	// KubeEvents, when set, gets each written failure of a named pod
	// (--kube-events); Run runs it and stops it after the trace.
	KubeEvents *kubeevent.Reporter
	// NodeDrops: with timeouts reported and diagnosed, watch the node's
	// drops of new flows' first packets (nodedrops.go), at most
	// NodeDropRate a second per CPU (0: no limit), so that a timeout's
	// diagnosis names the layer that dropped its SYNs (--node-drops).
	NodeDrops    bool
	NodeDropRate float64
	// CloudNATLimit is the connections the cloud's NAT gives toward one
	// destination (--cloud-nat-limit; eaddr_cloud_nat_limit); 0: not set.
	CloudNATLimit float64
}

// defaults fills the waits left 0.
func (c *Config) defaults() {
	if c.NamesWait <= 0 {
		c.NamesWait = DefaultNamesWait
	}
	if c.DiagnoseWait <= 0 {
		c.DiagnoseWait = DefaultDiagnoseWait
	}
	if c.RetryWindow <= 0 {
		c.RetryWindow = explain.RetryWindowNs
	}
}

// keep is what user space drops after the kernel's own filters, applied after
// attribution. unresolved: the filter could not decide, because the event's
// cgroup or pod is not known; such events are dropped and counted
// (filtered_unresolved), never passed as if they matched.
func (c *Config) keep(ev *decode.Event) (keep, unresolved bool) {
	if c.Comm != "" && string(ev.Comm) != c.Comm {
		return false, false
	}
	if len(c.NetNS) > 0 && !slices.Contains(c.NetNS, ev.NetNS) {
		return false, false
	}
	if c.Cgroup != "" {
		if ev.CgroupPath == "" {
			return false, true
		}
		if !strings.HasPrefix(ev.CgroupPath, c.Cgroup) {
			return false, false
		}
	}
	if c.Namespace == "" && c.Pod == "" && c.Container == "" && c.Selector == nil {
		return true, false
	}
	p := ev.Pod
	if p == nil {
		return false, ev.PodUnresolved != ""
	}
	if ev.PodNamesUnresolved != "" {
		return false, true
	}
	if (c.Namespace != "" && p.Namespace != c.Namespace) || (c.Pod != "" && p.Name != c.Pod) || (c.Container != "" && p.Container != c.Container) {
		return false, false
	}
	for k, v := range c.Selector {
		if p.Labels[k] != v {
			return false, false
		}
	}
	return true, false
}

// Hooks let the demo watch a trace; nil hooks are skipped.
type Hooks struct {
	Attached func()                                                      // after the probes are attached
	Event    func(ev *decode.Event, x *explain.Explanation, line []byte) // after each event was written; line is reused
}

// Run attaches, streams events to out until ctx is done, then detaches,
// drains what is queued, logs the totals and returns them. It is the one
// trace loop: `eaddr trace` and `eaddr demo` call it.
func Run(ctx context.Context, c Config, out io.Writer, log *slog.Logger, hooks Hooks) (Stats, error) {
	c.Tracer.Logger = log
	var met *metrics
	if c.MetricsAddr != "" {
		met = newMetrics(c.MetricsMaxSeries, c.PortsMaxSeries, c.MetricsNoDestination)
		addr, err := met.serve(ctx, c.MetricsAddr, defaultServerLimits, log)
		if err != nil {
			return Stats{}, err
		}
		log.Info("serving metrics", "url", "http://"+addr+"/metrics")
	}
	c.Tracer.Rate, c.Tracer.CgroupRate = c.Rate, c.CgroupRate
	t, err := tracer.New(c.Tracer)
	if err != nil {
		return Stats{}, err
	}
	defer t.Close()
	stopWatching := t.StopOnDone(ctx)
	defer stopWatching()

	r, err := newTraceRun(c, t, out, log, met, hooks)
	if err != nil {
		return Stats{}, err
	}
	defer r.close()
	if r.nodeDrops != nil {
		defer r.nodeDrops.start()() // stopped before r.close stops the diagnosis worker
	}
	if c.PortsInterval > 0 && (met != nil || c.KubeEvents != nil) {
		defer r.startPorts(ctx)() // stopped before r.close closes the socket iterator
	}
	if k := c.KubeEvents; k != nil {
		r.stopKube = runKubeEvents(k, met, log)
		defer r.stopKube()
	}
	if met != nil { // healthy before "attached" is logged: a probe that waits for the line sees 200
		met.stallAfter.Store(int64(readerStall(c.Flush)))
		met.readAt.Store(time.Now().UnixNano())
		met.healthy.Store(true)
		defer met.healthy.Store(false)
	}
	log.Info("attached", "syscalls", syscallNames(c.Tracer.Syscalls), "errnos", errnoNames(c.Tracer), "output", c.Output.String())
	if hooks.Attached != nil {
		hooks.Attached()
	}
	if err := r.loop(); err != nil {
		return r.stats(), err
	}
	if r.stopKube != nil {
		r.stopKube() // its last calls, so that the totals include them
	}
	return r.finish()
}

func errnoNames(o tracer.Options) string {
	if o.AllErrnos {
		return "all"
	}
	var names []string
	for _, n := range o.Errnos {
		name := decode.ErrnoName(n)
		if slices.Contains(o.UDPOnly, n) {
			name += "/udp"
		}
		names = append(names, name)
	}
	return strings.Join(slices.Compact(names), ",")
}

// traceRun is one trace: the stages an event goes through, in order, and
// their counters.
type traceRun struct {
	c   Config
	t   source // the tracer
	log *slog.Logger
	met *metrics

	cgroups   *pod.CgroupResolver // nil without cgroup2
	dec       decoder             // decode.Decoder
	names     *kube.Resolver
	pods      *pod.PodMapper
	hold      holdQueue
	explainer *explain.Explainer
	bins      *binWait           // the explainer's binary analysis; nil without it
	events    output.Events      // writes event records
	diag      *diagWorker        // nil: --diagnose=false
	quietDiag diagnose.Diagnosis // emit's copy of an expected failure's diagnosis, without its fix
	sockIter  *tracer.SockIter   // the diagnosis's socket reader; nil: sock_diag only
	nodeDrops *nodeDrops         // the node's drops, for timeouts' diagnoses; nil: not watched
	diagHold  []diagHeld
	held      *eventPool // the copies diagHold keeps
	share     *diagShare
	seenNetNS map[uint32]bool // netns already told to the diagnosis
	limits    *limitBook
	sk        *output.Sink
	sum       summary

	now       func() time.Time // the clock of the waits; time.Now but in tests
	attr      attributor       // the pod mapper
	consumers []consumer       // told of each event written, in order
	emitted   emitted          // what they are told, reused
	diagLate  *diagnose.Diagnosis
	raw       tracer.RawEvent
	ev        decode.Event
	x         explain.Explanation
	attempts  explain.Attempts // retries of one logical attempt, numbered
	stopKube  func()           // ends the Events reporter (--kube-events); nil without
	lastTick  time.Time

	written, filtered, filteredUnresolved uint64
	limitErr                              bool // a failed read of the kernel's counts was logged
}

func newTraceRun(c Config, t *tracer.Tracer, out io.Writer, log *slog.Logger, met *metrics, hooks Hooks) (*traceRun, error) {
	c.defaults()
	r := &traceRun{c: c, t: t, log: log, met: met, limits: newLimitBook(c.Rate > 0, c.CgroupRate > 0), hold: newHoldQueue(holdMax),
		now: time.Now, diagLate: lateDiagnosis(c.DiagnoseWait), held: newEventPool(holdMax)}
	if met != nil && r.limits.groups != nil {
		met.reg.MustRegister(r.limits.cgroupCollector())
	}
	cg, err := pod.NewCgroupResolver(t)
	dec := decode.NewDecoder(nil)
	if err != nil {
		log.Warn("cgroup paths unavailable, events carry cgroup ids only", "err", err)
		dec.NoCgroups = err.Error()
	} else {
		r.cgroups, dec.Cgroups = cg, cg
	}
	r.dec = dec
	_, pods := pod.PodCgroups()
	r.names = kube.NewResolver(c.CRIEndpoint, pods && !c.NoPods, log)
	host := c.HostNetNS
	if host == 0 {
		host, _ = netdiag.HostInode()
	}
	r.pods = pod.NewPodMapper(r.names, host)
	r.pods.CgroupV1 = pod.CgroupV1Mounted()
	r.attr = podAttribution{r.pods, r.names}
	if c.Explain > 0 {
		if r.explainer, r.bins, err = newExplainStage(); err != nil {
			r.close()
			return nil, err
		}
	}
	if c.DiagnoseEvery > 0 {
		d := diagnose.NewDiagnoser()
		netdiag.SetLogger(log) // says once if sock_diag cannot dump sockets and /proc/net is read instead
		d.NodePortLo, d.NodePortHi = c.NodePortLo, c.NodePortHi
		// The searches inside a snapshot (holders, a unix file's netns) get
		// the time the event waits for it.
		d.HoldersWait, d.ElsewhereWait = c.DiagnoseWait, c.DiagnoseWait
		d.HostNetNS = host
		if np := c.Tracer.NodePort; np != nil {
			d.HostNetNS = uint64(np.NetNS) // --nodeport-netns: where the NodePort rules are
		}
		d.NodePortRules = diagnose.NewHostRules(d.HostNetNS)
		d.Pods = r.names // the pod a host process's NodePort-suspect connect went to
		if c.SocketIterators {
			r.sockIter = OpenSockIter(log)
			if r.sockIter != nil {
				d.Iter = r.sockIter
			}
		}
		if c.NodeDrops && wantsTimeouts(&c.Tracer) {
			r.watchNodeDrops(d, host) // nodedrops.go
		}
		r.diag, r.seenNetNS, r.share = newDiagWorker(d), map[uint32]bool{}, newDiagShare(c.DiagnoseEvery)
	}
	r.sum = summary{start: time.Now(), every: c.SummaryEvery, enabled: c.SummaryEvery > 0 && c.Output == output.JSON}
	r.consumers = newConsumers(&r.c, &r.sum, met, hooks)
	// Lines are batched and handed to a writer goroutine whenever the ring
	// is drained; a stalled stdout makes batches drop (counted), never the
	// reader block. A closed stdout (EPIPE) stops the trace.
	r.sk = output.NewSink(out, 64<<10, 64, t.Stop) // at most 4 MiB waiting for stdout
	if c.Output == output.Table {
		r.sk.Add(append(r.sk.Buf(), output.TableHeader+"\n"...), 0)
	}
	return r, nil
}

// OpenSockIter loads the BPF socket iterators for diagnoses and `check`,
// or says why sockets are read with sock_diag alone and returns nil.
func OpenSockIter(log *slog.Logger) *tracer.SockIter {
	it, err := tracer.NewSockIter()
	if err != nil {
		log.Warn("no BPF socket iterators: sockets are read with sock_diag, which does not show whether bind() or connect() took a port, nor SO_REUSEADDR; diagnoses say so where that matters", "err", err)
		return nil
	}
	return it
}

func syscallNames(s []uint8) string {
	if len(s) == 0 {
		return "connect,bind"
	}
	var names []string
	for _, n := range s {
		names = append(names, decode.Syscall(n).String())
	}
	return strings.Join(names, ",")
}
