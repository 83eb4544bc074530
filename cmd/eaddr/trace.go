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
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pipeline"
	"github.com/eaddr/eaddr/tracer"
)

// TraceFlags are the flags of `eaddr trace`.
type TraceFlags struct {
	Output   string
	Errno    string
	Syscall  string
	Async    bool
	PID      uint32
	Comm     string
	NetNS    uint32
	Cgroup   string
	RingSize int
	Flush    time.Duration
	Node     string
	Explain  string

	CRIEndpoint string
	NamesWait   time.Duration
	Namespace   string
	Pod         string
	Container   string
	Selector    string

	Diagnose         bool
	DiagnoseInterval time.Duration
	SocketIterators  bool
	DiagnoseWait     time.Duration
	RetryWindow      time.Duration

	KubeEvents         bool
	Kubeconfig         string
	KubeEventsQPS      float64
	KubeEventsInterval time.Duration
	KubeEventsUpdate   time.Duration

	RateLimit        string
	MetricsAddr      string
	MetricsMaxSeries int
	SummaryInterval  time.Duration
	PortsInterval    time.Duration
	PortsTop         int
	PortsMaxSeries   int
	PortsWarn        int

	NodePortCollisions bool
	NodePortRange      string
	NodePortNetNS      uint32

	// tty is stdout when it is a terminal (nil otherwise): the default
	// --output and the human forms' width.
	tty *terminal
}

// SetFlags registers the flags on fs.
func (f *TraceFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "", "text: a few lines per failure for a person: who, what failed, what the client printed, the cause and the fix (the default when stdout is a terminal); table: a row per failure with its client, cause and fix under it; json: one JSON object per line, for log pipelines (docs/events.md; the default when stdout is not a terminal)")
	fs.StringVar(&f.Errno, "errno", "EADDRNOTAVAIL,EADDRINUSE,EAGAIN/udp", "errnos to report, by name or number, comma separated; NAME/udp: only from UDP sockets (the default's EAGAIN/udp: a UDP socket's connect() found no free local port to bind to; TCP and unix sockets' EAGAIN, such as a full unix backlog, are not reported unless asked for); 'all' reports every failure except EINPROGRESS, including probes programs make on purpose and print nothing about, marked explain.expected (glibc's nscd socket: ENOENT twice per name lookup)")
	fs.StringVar(&f.Syscall, "syscall", "connect,bind", "syscalls to trace: connect, bind or both")
	fs.BoolVar(&f.Async, "async", true, "with --errno all or ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH: also report a non-blocking connect() (EINPROGRESS) whose socket fails later, as \"async\":true; it follows up to 8192 pending connects and runs on every TCP state change. false: only what connect() itself returns")
	fs.Uint32Var(&f.PID, "pid", 0, "only this process id (filtered in the kernel); 0 for all")
	fs.StringVar(&f.Comm, "comm", "", "only processes whose comm (first 15 bytes of the name) is exactly this")
	fs.Uint32Var(&f.NetNS, "netns", 0, "only this network namespace inode, as in /proc/PID/ns/net (filtered in the kernel); it must exist at start; 0 for all")
	fs.StringVar(&f.Cgroup, "cgroup", "", "only processes whose cgroup v2 path starts with this prefix, which starts with /, e.g. /kubepods; an event whose cgroup is not known is dropped and counted as filtered_unresolved")
	fs.IntVar(&f.RingSize, "ring-size", tracer.DefaultRingSize, "ring buffer size in bytes, a power of two from the page size up to 256 MiB (268435456); events that do not fit are counted as lost")
	fs.DurationVar(&f.Flush, "flush-interval", 50*time.Millisecond, "the longest an event waits before it is written: the kernel wakes eaddr for every eighth of the ring buffer filled (512 KiB by default) or on this timer, not for each event (a wakeup costs several µs, more in a VM); 0 wakes it for every event")
	fs.StringVar(&f.Node, "node", "", "node name in each event (default: $NODE_NAME, else the hostname)")
	fs.BoolVar(&f.Diagnose, "diagnose", true, "per event, read the netns of the failure (port range, sockets toward the destination by state, who holds them, addresses) and give the root cause and a fix")
	fs.BoolVar(&f.SocketIterators, "socket-iterators", true, "read a netns's sockets for a diagnosis with BPF socket iterators, which show what sock_diag does not (whether bind() or connect() took a port, SO_REUSEADDR, TIME_WAIT timestamps); false: sock_diag only, and diagnoses say what it cannot tell")
	fs.DurationVar(&f.DiagnoseInterval, "diagnose-interval", time.Second, "at most one netns snapshot per netns, syscall, errno and address in this interval; events inside it share the snapshot")
	fs.DurationVar(&f.DiagnoseWait, "diagnose-wait", pipeline.DefaultDiagnoseWait, "the longest an event waits for its netns snapshot, and the time budget of the searches inside it (the processes holding the sockets, the netns of a unix socket file); then it goes out saying the diagnosis is not ready, and later events of the same failure carry it (diagnoses_late in the stopped line)")
	fs.StringVar(&f.RateLimit, "rate-limit", "100/s", "at most this many events per second (bursts as many) per cgroup, netns, syscall, errno and address, counted in the kernel: the others never reach the ring buffer; the next event that passes says how many were suppressed (\"suppressed\"), and so do the summary and metrics. 0 or off: every failure is an event")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on /metrics and a health check on /healthz at this address, e.g. :9630 (off when empty)")
	fs.IntVar(&f.MetricsMaxSeries, "metrics-max-series", 1000, "at most this many syscall/errno/namespace/pod series; later pods are counted under namespace and pod \"other\"")
	fs.DurationVar(&f.PortsInterval, "ports-interval", pipeline.DefaultPortsInterval, "with --metrics-addr or --kube-events: this often, the port budget of every network namespace with a live process (the host's and every pod's), by the model of the diagnosis, before any failure: eaddr_ephemeral_ports_in_use toward the --ports-top busiest destinations, _usable and _held_for_all; with --kube-events, an EphemeralPortsNearlyExhausted Event on a pod past --warn (0: off; the gauges then move at diagnoses only). A sample that takes longer than 1% of this stretches the wait to 100 times its time (logged; eaddr_port_sample_interval_seconds)")
	fs.IntVar(&f.PortsTop, "ports-top", pipeline.DefaultPortsTop, "with --ports-interval: the busiest destinations of each netns given a series")
	fs.IntVar(&f.PortsWarn, "warn", pipeline.DefaultPortsWarn, "with --kube-events and --ports-interval: a Warning Event EphemeralPortsNearlyExhausted on a pod whose netns holds this percent (1-100) or more of the ports a connect() toward one of its --ports-top busiest destinations tries (what eaddr_ephemeral_ports_in_use counts), before any connect() fails; it names the holders and the fix, checked again against the netns before it is posted")
	fs.IntVar(&f.PortsMaxSeries, "ports-max-series", 3000, "at most this many eaddr_ephemeral_ports_* series; the ones past it are not made and are counted in eaddr_port_series_cut_total")
	fs.DurationVar(&f.SummaryInterval, "summary-interval", time.Minute, "write a {\"kind\":\"summary\"} record with counts per errno and losses this often (JSON output only; 0: never)")
	fs.BoolVar(&f.NodePortCollisions, "nodeport-collisions", false, "also report a connect() in the host netns whose kernel-chosen source port is in the NodePort range (kind nodeport_collision): replies to it can be captured by a NodePort rule. Its diagnosis names the pod of this node it went to (a kubelet probe's), and with --kube-events that pod gets a Warning SourcePortInNodePortRange. Off, it costs nothing")
	fs.StringVar(&f.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint32Var(&f.NodePortNetNS, "nodeport-netns", 0, "netns inode checked by --nodeport-collisions (default: the host's, that of pid 1, else of kthreadd, pid 2)")
	fs.StringVar(&f.CRIEndpoint, "cri-endpoint", "", "container runtime socket for pod names (default: the first of /run/containerd/containerd.sock, /run/k3s/containerd/containerd.sock, /var/run/crio/crio.sock, /run/cri-dockerd.sock); one given must be a unix socket (path or unix://path) at start; without one, or while it does not answer, events carry pod UIDs and container IDs only, and say why")
	fs.DurationVar(&f.NamesWait, "names-wait", pipeline.DefaultNamesWait, "the longest an event waits for the container runtime to name its pod and container; then it goes out with the pod UID and container ID, and says why (pod.names_unresolved). At most 4096 events wait at once")
	fs.StringVar(&f.Namespace, "namespace", "", "only pods in this Kubernetes namespace (as --pod, --container and --selector: an event whose pod or names are not known is dropped and counted as filtered_unresolved)")
	fs.StringVar(&f.Pod, "pod", "", "only this pod (name)")
	fs.StringVar(&f.Container, "container", "", "only this container (name)")
	fs.StringVar(&f.Selector, "selector", "", "only pods with these labels: k=v[,k=v...]")
	fs.BoolVar(&f.KubeEvents, "kube-events", false, "also post a Warning Event (events.k8s.io/v1) on the failing pod, one per pod, reason and destination per --kube-events-interval, its count updated: kubectl describe pod shows it. Needs an API server: in-cluster from the pod's service account (kubectl apply -k deploy/kube-events grants create and patch on events), or --kubeconfig. A slow or down API server never delays tracing; what reaches no Event is counted (eaddr_kube_events_dropped_total, and eaddr_kube_events_unnamed_total for a pod the runtime did not name)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "with --kube-events: the API server and credentials from this kubeconfig file's current context (token, token file or client certificate), instead of the pod's service account")
	fs.Float64Var(&f.KubeEventsQPS, "kube-events-qps", 5, "with --kube-events: at most this many API calls per second from this node (bursts of 10); failures wait, counted, in their Event")
	fs.DurationVar(&f.KubeEventsInterval, "kube-events-interval", 10*time.Minute, "with --kube-events: a pod's failures of one reason toward one destination are one Event for this long, then a new Event")
	fs.DurationVar(&f.KubeEventsUpdate, "kube-events-update-interval", 30*time.Second, "with --kube-events: an Event's count (its series) is updated at most this often")
	fs.DurationVar(&f.RetryWindow, "retry-window", 50*time.Millisecond, "a failure within this long (kernel time) of the previous one of the same thread (of a Go program: any of its threads), syscall, errno and address, on the same fd or one of the next two, is its retry (\"attempt\": 2, 3, ...); a client that sleeps between tries keeps its own longer window (netcat-traditional: 2.5s)")
	fs.StringVar(&f.Explain, "explain", "short", "per event, say what the errno means, which client failed and what it printed: short; full (also how every other client and libc words the same failure, about 3.5 KB more per event; eaddr explain lists them too); or off")
}

// maxRingSize bounds --ring-size: the ring is locked kernel memory, and a
// larger one only hides a reader that does not keep up (the default holds
// tens of thousands of events).
const maxRingSize = 256 << 20

// maxWait bounds --names-wait, --diagnose-wait and --retry-window: an event
// held longer is no longer news, and a minute of a storm held for names
// would not fit the 4096 events the queue keeps anyway.
const maxWait = time.Minute

func (f *TraceFlags) config() (pipeline.Config, error) {
	var c pipeline.Config
	for _, step := range []func(*pipeline.Config) error{f.kernelOptions, f.filters, f.output, f.ports, f.diagnosis, f.kubeEvents} {
		if err := step(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// kernelOptions: what the BPF program reports and filters, and the ring.
func (f *TraceFlags) kernelOptions(c *pipeline.Config) error {
	if strings.EqualFold(strings.TrimSpace(f.Errno), "all") {
		c.Tracer.AllErrnos = true
	} else {
		errnos, udpOnly, err := parseErrnoFlag(f.Errno)
		if err != nil {
			return err
		}
		c.Tracer.Errnos, c.Tracer.UDPOnly = errnos, udpOnly
	}
	for _, s := range strings.Split(f.Syscall, ",") {
		switch strings.TrimSpace(s) {
		case "connect":
			c.Tracer.Syscalls = append(c.Tracer.Syscalls, tracer.SysConnect)
		case "bind":
			c.Tracer.Syscalls = append(c.Tracer.Syscalls, tracer.SysBind)
		default:
			return usageErrorf("--syscall: %q is not connect or bind", s)
		}
	}
	c.Tracer.Async = f.Async && tracer.WantsAsync(&c.Tracer)
	c.Tracer.PID = f.PID
	if err := checkNetNSFlag(f.NetNS); err != nil {
		return err
	}
	c.Tracer.NetNS = f.NetNS
	if f.RingSize <= 0 || f.RingSize&(f.RingSize-1) != 0 || f.RingSize < os.Getpagesize() || f.RingSize > maxRingSize {
		return usageErrorf("--ring-size %d is not a power of two from %d to %d (256 MiB)", f.RingSize, os.Getpagesize(), maxRingSize)
	}
	c.Tracer.RingSize = f.RingSize
	if f.Flush < 0 {
		return usageErrorf("--flush-interval must not be negative")
	}
	c.Flush = f.Flush
	if f.Flush > 0 {
		c.Tracer.WakeupBytes = f.RingSize / 8
	}
	return nil
}

// filters: what user space drops after attribution.
func (f *TraceFlags) filters(c *pipeline.Config) error {
	if err := checkCgroupFlag(f.Cgroup); err != nil {
		return err
	}
	if err := checkCRIFlag(f.CRIEndpoint); err != nil {
		return err
	}
	if len(f.Comm) > 15 {
		return usageErrorf("--comm: %q is longer than the 15 bytes the kernel keeps of a comm", f.Comm)
	}
	c.Comm = f.Comm
	c.Cgroup = f.Cgroup
	c.CRIEndpoint, c.Namespace, c.Pod, c.Container = f.CRIEndpoint, f.Namespace, f.Pod, f.Container
	if f.NamesWait <= 0 || f.NamesWait > maxWait {
		return usageErrorf("--names-wait must be from 1ns to %v, not %v", maxWait, f.NamesWait)
	}
	c.NamesWait = f.NamesWait
	if f.Selector != "" {
		c.Selector = map[string]string{}
		for _, kv := range strings.Split(f.Selector, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return usageErrorf("--selector: %q is not key=value", kv)
			}
			c.Selector[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	rate, err := pipeline.ParseRate(f.RateLimit)
	if err != nil {
		return usageErrorf("--rate-limit: %v", err)
	}
	c.Rate = rate
	return nil
}

// output: the stream's form, the explanation, metrics and summaries.
func (f *TraceFlags) output(c *pipeline.Config) error {
	if f.Output == "" {
		f.Output = defaultOutput(f.tty)
	}
	format, err := output.ParseFormat(f.Output, output.Text, output.Table, output.JSON)
	if err != nil {
		return usageErrorf("--output: %v", err)
	}
	c.Output = format
	if f.tty != nil {
		c.Human.Width = f.tty.Width
	}
	switch f.Explain {
	case "off":
	case "short":
		c.Explain = 1
	case "full":
		c.Explain = 2
	default:
		return usageErrorf("--explain must be full, short or off, not %q", f.Explain)
	}
	if f.RetryWindow <= 0 || f.RetryWindow > maxWait {
		return usageErrorf("--retry-window must be from 1ns to %v, not %v", maxWait, f.RetryWindow)
	}
	c.RetryWindow = f.RetryWindow
	if f.MetricsMaxSeries < 1 {
		return usageErrorf("--metrics-max-series must be at least 1")
	}
	if f.SummaryInterval < 0 {
		return usageErrorf("--summary-interval must not be negative")
	}
	c.MetricsAddr, c.MetricsMaxSeries, c.SummaryEvery = f.MetricsAddr, f.MetricsMaxSeries, f.SummaryInterval
	c.Node = nodeName(f.Node)
	return nil
}

// ports: the port sampler and its series.
func (f *TraceFlags) ports(c *pipeline.Config) error {
	if f.PortsInterval < 0 {
		return usageErrorf("--ports-interval must not be negative")
	}
	if f.PortsTop < 1 {
		return usageErrorf("--ports-top must be at least 1")
	}
	if f.PortsMaxSeries < 1 {
		return usageErrorf("--ports-max-series must be at least 1")
	}
	if f.PortsWarn < 1 || f.PortsWarn > 100 {
		return usageErrorf("--warn must be a percent from 1 to 100, not %d", f.PortsWarn)
	}
	c.PortsInterval, c.PortsTop, c.PortsMaxSeries, c.PortsWarn = f.PortsInterval, f.PortsTop, f.PortsMaxSeries, f.PortsWarn
	return nil
}

// diagnosis: snapshots and the NodePort check.
func (f *TraceFlags) diagnosis(c *pipeline.Config) error {
	lo, hi, err := parsePortRange(f.NodePortRange)
	if err != nil {
		return usageErrorf("--node-port-range: %v", err)
	}
	c.NodePortLo, c.NodePortHi = lo, hi
	if f.Diagnose {
		if f.DiagnoseInterval <= 0 {
			return usageErrorf("--diagnose-interval must be positive, not %v", f.DiagnoseInterval)
		}
		c.DiagnoseEvery = f.DiagnoseInterval
		c.SocketIterators = f.SocketIterators
		if f.DiagnoseWait <= 0 || f.DiagnoseWait > maxWait {
			return usageErrorf("--diagnose-wait must be from 1ns to %v, not %v", maxWait, f.DiagnoseWait)
		}
		c.DiagnoseWait = f.DiagnoseWait
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
		c.Tracer.NodePort = &tracer.NodePortCheck{NetNS: inode, Lo: uint16(lo), Hi: uint16(hi)}
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
	if f.tty = stdoutTerminal(stdout); f.tty != nil {
		f.tty.watch(ctx)
	}
	c, err := f.config()
	if err != nil {
		return err
	}
	_, err = pipeline.Run(ctx, c, stdout, log, pipeline.Hooks{})
	return err
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

// kubeEvents: the Events reporter (--kube-events), with its API server from
// the pod's service account or --kubeconfig. A missing configuration is an
// error at start, never a silent no-op.
func (f *TraceFlags) kubeEvents(c *pipeline.Config) error {
	if !f.KubeEvents {
		if f.Kubeconfig != "" {
			return usageErrorf("--kubeconfig is for --kube-events, which is off")
		}
		return nil
	}
	if f.KubeEventsQPS <= 0 || f.KubeEventsInterval <= 0 || f.KubeEventsUpdate <= 0 {
		return usageErrorf("--kube-events-qps, --kube-events-interval and --kube-events-update-interval must be positive")
	}
	var client *kubeevent.Client
	var err error
	if f.Kubeconfig != "" {
		client, err = kubeevent.FromKubeconfig(f.Kubeconfig)
	} else {
		client, err = kubeevent.InCluster()
	}
	if err != nil {
		return fmt.Errorf("--kube-events: %w", err)
	}
	c.KubeEvents = kubeevent.New(client, kubeevent.Options{Instance: "eaddr-" + c.Node, QPS: f.KubeEventsQPS, Interval: f.KubeEventsInterval, UpdateEvery: f.KubeEventsUpdate})
	return nil
}

// parseErrnoFlag reads --errno: names or numbers, comma separated, each
// optionally NAME/udp (reported only from UDP sockets). An errno given both
// ways is a usage error: which one is meant cannot be told.
func parseErrnoFlag(v string) (errnos, udpOnly []int, err error) {
	var plain []int
	for _, s := range strings.Split(v, ",") {
		name, proto, qualified := strings.Cut(strings.TrimSpace(s), "/")
		if qualified && !strings.EqualFold(strings.TrimSpace(proto), "udp") {
			return nil, nil, usageErrorf("--errno: %q: only /udp can follow an errno", s)
		}
		n, err := decode.ParseErrno(name)
		if err != nil {
			return nil, nil, usageErrorf("--errno: %v", err)
		}
		if qualified {
			udpOnly = append(udpOnly, n)
		} else {
			plain = append(plain, n)
		}
		errnos = append(errnos, n)
	}
	for _, n := range udpOnly {
		if slices.Contains(plain, n) {
			return nil, nil, usageErrorf("--errno: %s is given both for every socket and for UDP sockets only", decode.ErrnoName(n))
		}
	}
	return errnos, udpOnly, nil
}
