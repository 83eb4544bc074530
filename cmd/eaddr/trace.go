package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/pod/kube"
	"github.com/eaddr/eaddr/tracer"
)

// TraceFlags are the flags of `eaddr trace`.
type TraceFlags struct {
	Output   string
	Errno    string
	Syscall  string
	PID      uint32
	Comm     string
	NetNS    uint32
	Cgroup   string
	RingSize int
	Flush    time.Duration
	Node     string
	Explain  string

	CRIEndpoint string
	Namespace   string
	Pod         string
	Container   string
	Selector    string

	Diagnose         bool
	DiagnoseInterval time.Duration

	RateLimit        string
	MetricsAddr      string
	MetricsMaxSeries int
	SummaryInterval  time.Duration

	NodePortCollisions bool
	NodePortRange      string
	NodePortNetNS      uint32
}

// SetFlags registers the flags on fs.
func (f *TraceFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "json", "json: one JSON object per line (docs/events.md); table: aligned columns for a person")
	fs.StringVar(&f.Errno, "errno", "EADDRNOTAVAIL,EADDRINUSE", "errnos to report, by name or number, comma separated; 'all' reports every failure except EINPROGRESS")
	fs.StringVar(&f.Syscall, "syscall", "connect,bind", "syscalls to trace: connect, bind or both")
	fs.Uint32Var(&f.PID, "pid", 0, "only this process id (filtered in the kernel); 0 for all")
	fs.StringVar(&f.Comm, "comm", "", "only processes whose comm (first 15 bytes of the name) is exactly this")
	fs.Uint32Var(&f.NetNS, "netns", 0, "only this network namespace inode, as in /proc/PID/ns/net (filtered in the kernel); it must exist at start; 0 for all")
	fs.StringVar(&f.Cgroup, "cgroup", "", "only processes whose cgroup v2 path starts with this prefix, which starts with /, e.g. /kubepods; an event whose cgroup is not known is dropped and counted as filtered_unresolved")
	fs.IntVar(&f.RingSize, "ring-size", tracer.DefaultRingSize, "ring buffer size in bytes, a power of two from the page size up to 256 MiB (268435456); events that do not fit are counted as lost")
	fs.DurationVar(&f.Flush, "flush-interval", 50*time.Millisecond, "the longest an event waits before it is written: the kernel wakes eaddr for every 64 KiB of events or on this timer, not for each event (a wakeup per event costs several µs per failing call); 0 wakes it for every event")
	fs.StringVar(&f.Node, "node", "", "node name in each event (default: $NODE_NAME, else the hostname)")
	fs.BoolVar(&f.Diagnose, "diagnose", true, "per event, read the netns of the failure (port range, sockets toward the destination by state, who holds them, addresses) and give the root cause and a fix")
	fs.DurationVar(&f.DiagnoseInterval, "diagnose-interval", time.Second, "at most one netns snapshot per netns, syscall, errno and address in this interval; events inside it share the snapshot")
	fs.StringVar(&f.RateLimit, "rate-limit", "100/s", "at most this many events per second per netns, syscall, errno and address; the next event that passes says how many were suppressed (\"suppressed\"), and so does the summary. 0 or off: every event")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on /metrics and a health check on /healthz at this address, e.g. :9630 (off when empty)")
	fs.IntVar(&f.MetricsMaxSeries, "metrics-max-series", 1000, "at most this many syscall/errno/namespace/pod series; later pods are counted under namespace and pod \"other\"")
	fs.DurationVar(&f.SummaryInterval, "summary-interval", time.Minute, "write a {\"kind\":\"summary\"} record with counts per errno and losses this often (JSON output only; 0: never)")
	fs.BoolVar(&f.NodePortCollisions, "nodeport-collisions", false, "also report a connect() in the host netns whose kernel-chosen source port is in the NodePort range (kind nodeport_collision): replies to it can be captured by a NodePort rule. Off, it costs nothing")
	fs.StringVar(&f.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint32Var(&f.NodePortNetNS, "nodeport-netns", 0, "netns inode checked by --nodeport-collisions (default: the host's, that of pid 1)")
	fs.StringVar(&f.CRIEndpoint, "cri-endpoint", "", "container runtime socket for pod names (default: the first of /run/containerd/containerd.sock, /run/k3s/containerd/containerd.sock, /var/run/crio/crio.sock, /run/cri-dockerd.sock); one given must be a unix socket (path or unix://path) at start; without one, or while it does not answer, events carry pod UIDs and container IDs only, and say why")
	fs.StringVar(&f.Namespace, "namespace", "", "only pods in this Kubernetes namespace (as --pod, --container and --selector: an event whose pod or names are not known is dropped and counted as filtered_unresolved)")
	fs.StringVar(&f.Pod, "pod", "", "only this pod (name)")
	fs.StringVar(&f.Container, "container", "", "only this container (name)")
	fs.StringVar(&f.Selector, "selector", "", "only pods with these labels: k=v[,k=v...]")
	fs.StringVar(&f.Explain, "explain", "full", "per event, say what the errno means, which client failed and what it printed: full (with how every other client words it), short (without), or off")
}

// maxRingSize bounds --ring-size: the ring is locked kernel memory, and a
// larger one only hides a reader that does not keep up (the default holds
// tens of thousands of events).
const maxRingSize = 256 << 20

// traceConfig is what the flags mean, checked.
type traceConfig struct {
	table bool
	opts  tracer.Options
	comm  string
	cg    string
	node  string
	// explain: 0 off, 1 short, 2 full
	explain int
	cri     string
	flush   time.Duration
	metrics string
	series  int
	summary time.Duration
	rate    float64
	// pod filters
	namespace, pod, container string
	selector                  map[string]string
	// diagnose interval; 0: no diagnosis
	diagnose time.Duration
	nodeLo   int
	nodeHi   int
}

func (f *TraceFlags) config() (traceConfig, error) {
	var c traceConfig
	for _, step := range []func(*traceConfig) error{f.kernelOptions, f.filters, f.output, f.diagnosis} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// kernelOptions: what the BPF program reports and filters, and the ring.
func (f *TraceFlags) kernelOptions(c *traceConfig) error {
	if strings.EqualFold(strings.TrimSpace(f.Errno), "all") {
		c.opts.AllErrnos = true
	} else {
		for _, s := range strings.Split(f.Errno, ",") {
			n, err := decode.ParseErrno(s)
			if err != nil {
				return usageErrorf("--errno: %v", err)
			}
			c.opts.Errnos = append(c.opts.Errnos, n)
		}
	}
	for _, s := range strings.Split(f.Syscall, ",") {
		switch strings.TrimSpace(s) {
		case "connect":
			c.opts.Syscalls = append(c.opts.Syscalls, tracer.SysConnect)
		case "bind":
			c.opts.Syscalls = append(c.opts.Syscalls, tracer.SysBind)
		default:
			return usageErrorf("--syscall: %q is not connect or bind", s)
		}
	}
	c.opts.PID = f.PID
	if err := checkNetNSFlag(f.NetNS); err != nil {
		return err
	}
	c.opts.NetNS = f.NetNS
	if f.RingSize <= 0 || f.RingSize&(f.RingSize-1) != 0 || f.RingSize < os.Getpagesize() || f.RingSize > maxRingSize {
		return usageErrorf("--ring-size %d is not a power of two from %d to %d (256 MiB)", f.RingSize, os.Getpagesize(), maxRingSize)
	}
	c.opts.RingSize = f.RingSize
	if f.Flush < 0 {
		return usageErrorf("--flush-interval must not be negative")
	}
	c.flush = f.Flush
	if f.Flush > 0 {
		c.opts.WakeupBytes = min(64<<10, f.RingSize/4)
	}
	return nil
}

// filters: what user space drops after attribution.
func (f *TraceFlags) filters(c *traceConfig) error {
	if err := checkCgroupFlag(f.Cgroup); err != nil {
		return err
	}
	if err := checkCRIFlag(f.CRIEndpoint); err != nil {
		return err
	}
	if len(f.Comm) > 15 {
		return usageErrorf("--comm: %q is longer than the 15 bytes the kernel keeps of a comm", f.Comm)
	}
	c.comm = f.Comm
	c.cg = f.Cgroup
	c.cri, c.namespace, c.pod, c.container = f.CRIEndpoint, f.Namespace, f.Pod, f.Container
	if f.Selector != "" {
		c.selector = map[string]string{}
		for _, kv := range strings.Split(f.Selector, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return usageErrorf("--selector: %q is not key=value", kv)
			}
			c.selector[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	rate, err := parseRate(f.RateLimit)
	if err != nil {
		return usageErrorf("--rate-limit: %v", err)
	}
	c.rate = rate
	return nil
}

// output: the stream's form, the explanation, metrics and summaries.
func (f *TraceFlags) output(c *traceConfig) error {
	switch f.Output {
	case "json":
	case "table":
		c.table = true
	default:
		return usageErrorf("--output must be json or table, not %q", f.Output)
	}
	switch f.Explain {
	case "off":
	case "short":
		c.explain = 1
	case "full":
		c.explain = 2
	default:
		return usageErrorf("--explain must be full, short or off, not %q", f.Explain)
	}
	if f.MetricsMaxSeries < 1 {
		return usageErrorf("--metrics-max-series must be at least 1")
	}
	if f.SummaryInterval < 0 {
		return usageErrorf("--summary-interval must not be negative")
	}
	c.metrics, c.series, c.summary = f.MetricsAddr, f.MetricsMaxSeries, f.SummaryInterval
	c.node = nodeName(f.Node)
	return nil
}

// diagnosis: snapshots and the NodePort check.
func (f *TraceFlags) diagnosis(c *traceConfig) error {
	lo, hi, err := parsePortRange(f.NodePortRange)
	if err != nil {
		return usageErrorf("--node-port-range: %v", err)
	}
	c.nodeLo, c.nodeHi = lo, hi
	if f.Diagnose {
		if f.DiagnoseInterval <= 0 {
			return usageErrorf("--diagnose-interval must be positive, not %v", f.DiagnoseInterval)
		}
		c.diagnose = f.DiagnoseInterval
	}
	if f.NodePortCollisions {
		inode := f.NodePortNetNS
		if inode == 0 {
			host, err := netdiag.HostInode()
			if err != nil {
				return fmt.Errorf("--nodeport-collisions: finding the host network namespace: %w", err)
			}
			inode = uint32(host)
		}
		c.opts.NodePort = &tracer.NodePortCheck{NetNS: inode, Lo: uint16(lo), Hi: uint16(hi)}
	}
	return nil
}

func nodeName(flag string) string {
	if flag != "" {
		return flag
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("trace", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: eaddr trace [flags]\n\nTrace failed connect() and bind() calls on this node (needs root). Logs go to stderr;\nonce the probes are attached, a line containing 'attached' is logged.\n\nFlags:\n%s", fs.FlagUsages())
	}
	var f TraceFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	c, err := f.config()
	if err != nil {
		return err
	}
	return trace(ctx, c, stdout, log, traceHooks{})
}

// keep is what user space drops after the kernel's own filters, applied after
// attribution. unresolved: the filter could not decide, because the event's
// cgroup or pod is not known; such events are dropped and counted
// (filtered_unresolved), never passed as if they matched.
func (c *traceConfig) keep(ev *decode.Event) (keep, unresolved bool) {
	if c.comm != "" && string(ev.Comm) != c.comm {
		return false, false
	}
	if c.cg != "" {
		if ev.CgroupPath == "" {
			return false, true
		}
		if !strings.HasPrefix(ev.CgroupPath, c.cg) {
			return false, false
		}
	}
	if c.namespace == "" && c.pod == "" && c.container == "" && c.selector == nil {
		return true, false
	}
	p := ev.Pod
	if p == nil {
		return false, ev.PodUnresolved != ""
	}
	if ev.PodNamesUnresolved != "" {
		return false, true
	}
	if (c.namespace != "" && p.Namespace != c.namespace) || (c.pod != "" && p.Name != c.pod) || (c.container != "" && p.Container != c.container) {
		return false, false
	}
	for k, v := range c.selector {
		if p.Labels[k] != v {
			return false, false
		}
	}
	return true, false
}

// traceHooks let the demo watch a trace; nil hooks are skipped.
type traceHooks struct {
	attached func()                                                      // after the probes are attached
	event    func(ev *decode.Event, x *explain.Explanation, line []byte) // after each event was written; line is reused
}

// trace attaches, streams events to out until ctx is done, then detaches,
// drains what is queued and logs the totals.
func trace(ctx context.Context, c traceConfig, out io.Writer, log *slog.Logger, hooks traceHooks) error {
	c.opts.Logger = log
	var met *metrics
	if c.metrics != "" {
		met = newMetrics(c.series)
		addr, err := met.serve(ctx, c.metrics, log)
		if err != nil {
			return err
		}
		log.Info("serving metrics", "url", "http://"+addr+"/metrics")
	}
	t, err := tracer.New(c.opts)
	if err != nil {
		return err
	}
	defer t.Close()
	stopWatching := t.StopOnDone(ctx)
	defer stopWatching()

	r, err := newTraceRun(c, t, out, log, met, hooks)
	if err != nil {
		return err
	}
	defer r.close()
	log.Info("attached", "syscalls", syscallNames(c.opts.Syscalls), "errnos", errnoNames(c.opts), "output", map[bool]string{true: "table", false: "json"}[c.table])
	if hooks.attached != nil {
		hooks.attached()
	}
	if met != nil {
		met.healthy.Store(true)
		defer met.healthy.Store(false)
	}
	if err := r.loop(); err != nil {
		return err
	}
	return r.finish()
}

func errnoNames(o tracer.Options) string {
	if o.AllErrnos {
		return "all"
	}
	var names []string
	for _, n := range o.Errnos {
		names = append(names, decode.ErrnoName(n))
	}
	return strings.Join(slices.Compact(names), ",")
}

// traceRun is one trace: the stages an event goes through, in order, and
// their counters.
type traceRun struct {
	c     traceConfig
	t     *tracer.Tracer
	log   *slog.Logger
	met   *metrics
	hooks traceHooks

	cg        *pod.CgroupResolver // nil without cgroup2
	dec       *decode.Decoder
	cri       *kube.Resolver
	pods      *pod.PodMapper
	hold      holdQueue
	explainer *explain.Explainer
	diag      *diagWorker // nil: --diagnose=false
	diagHold  []diagHeld
	share     *diagShare
	seenNetNS map[uint32]bool // netns already told to the diagnosis
	limiter   *rateLimiter
	sk        *sink
	sum       summary

	raw      tracer.RawEvent
	ev       decode.Event
	x        explain.Explanation
	lastTick time.Time

	written, filtered, filteredUnresolved uint64
}

func newTraceRun(c traceConfig, t *tracer.Tracer, out io.Writer, log *slog.Logger, met *metrics, hooks traceHooks) (*traceRun, error) {
	r := &traceRun{c: c, t: t, log: log, met: met, hooks: hooks, limiter: newRateLimiter(c.rate), hold: newHoldQueue(holdMax)}
	cg, err := pod.NewCgroupResolver(t)
	r.dec = decode.NewDecoder(nil)
	if err != nil {
		log.Warn("cgroup paths unavailable, events carry cgroup ids only", "err", err)
		r.dec.NoCgroups = err.Error()
	} else {
		r.cg, r.dec.Cgroups = cg, cg
	}
	r.cri = kube.NewResolver(c.cri, log)
	host, _ := netdiag.HostInode()
	r.pods = pod.NewPodMapper(r.cri, host)
	r.pods.CgroupV1 = pod.CgroupV1Mounted()
	if c.explain > 0 {
		if r.explainer, err = explain.NewExplainer(); err != nil {
			r.close()
			return nil, err
		}
	}
	if c.diagnose > 0 {
		d := diagnose.NewDiagnoser()
		netdiag.SetLogger(log) // says once if sock_diag cannot dump sockets and /proc/net is read instead
		d.Interval, d.NodePortLo, d.NodePortHi = c.diagnose, c.nodeLo, c.nodeHi
		d.HostNetNS = host
		r.diag, r.seenNetNS, r.share = newDiagWorker(d), map[uint32]bool{}, newDiagShare(c.diagnose)
	}
	r.sum = summary{start: time.Now(), every: c.summary, enabled: c.summary > 0 && !c.table}
	// Lines are batched and handed to a writer goroutine whenever the ring
	// is drained; a stalled stdout makes batches drop (counted), never the
	// reader block. A closed stdout (EPIPE) stops the trace.
	r.sk = newSink(out, 64<<10, 64, t.Stop) // at most 4 MiB waiting for stdout
	if c.table {
		r.sk.add(append(r.sk.buf(), decode.TableHeader+"\n"...), 0)
	}
	return r, nil
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

// parsePortRange reads "LO-HI" (or "LO HI", as the sysctl prints it).
func parsePortRange(s string) (int, int, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == ' ' || r == '\t' })
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%q is not LO-HI", s)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("%q is not a port range LO-HI within 1-65535", s)
	}
	return lo, hi, nil
}

// summary counts what the JSON stream carried between summary records.
type summary struct {
	enabled     bool
	every       time.Duration
	start       time.Time
	events      uint64
	nodeport    uint64
	suppr       uint64 // held back by the rate limit in this interval
	errnos      [256]uint64
	lostSeen    uint64 // kernel drops at the last record
	droppedSeen uint64 // output drops at the last record
}

func (s *summary) suppress() { s.suppr++ }

func (s *summary) count(ev *decode.Event) {
	if !s.enabled {
		return
	}
	s.events++
	switch {
	case ev.NodePort:
		s.nodeport++
	case ev.Errno > 0 && ev.Errno < len(s.errnos):
		s.errnos[ev.Errno]++
	}
}

// append writes the record and starts the next interval.
func (s *summary) append(b []byte, now time.Time, node string, lostTotal, droppedTotal, suppressedTotal uint64) []byte {
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, decode.Schema, 10)
	b = append(b, `,"kind":"summary","time":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","since":"`...)
	b = s.start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if node != "" {
		b = append(b, `,"node":`...)
		b = decode.AppendString(b, node)
	}
	b = append(b, `,"events":`...)
	b = strconv.AppendUint(b, s.events, 10)
	b = append(b, `,"errnos":{`...)
	first := true
	for n, c := range s.errnos {
		if c == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = decode.AppendErrnoName(b, n)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, c, 10)
	}
	b = append(b, '}')
	if s.nodeport > 0 {
		b = append(b, `,"nodeport_collisions":`...)
		b = strconv.AppendUint(b, s.nodeport, 10)
	}
	b = append(b, `,"lost":`...)
	b = strconv.AppendUint(b, lostTotal-s.lostSeen, 10)
	b = append(b, `,"lost_total":`...)
	b = strconv.AppendUint(b, lostTotal, 10)
	b = append(b, `,"dropped":`...)
	b = strconv.AppendUint(b, droppedTotal-s.droppedSeen, 10)
	b = append(b, `,"dropped_total":`...)
	b = strconv.AppendUint(b, droppedTotal, 10)
	b = append(b, `,"suppressed":`...)
	b = strconv.AppendUint(b, s.suppr, 10)
	b = append(b, `,"suppressed_total":`...)
	b = strconv.AppendUint(b, suppressedTotal, 10)
	b = append(b, '}')
	*s = summary{enabled: s.enabled, every: s.every, start: now, lostSeen: lostTotal, droppedSeen: droppedTotal}
	return b
}
