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
	NetNS    []string
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
	NodeDrops        bool
	NodeDropRate     float64
	CloudNATLimit    float64
	DiagnoseWait     time.Duration
	RetryWindow      time.Duration

	KubeEvents         bool
	Kubeconfig         string
	KubeEventsQPS      float64
	KubeEventsInterval time.Duration
	KubeEventsUpdate   time.Duration

	RateLimit        string
	RateLimitCgroup  string
	MetricsAddr      string
	MetricsMaxSeries int
	MetricsNoDest    bool
	SummaryInterval  time.Duration
	PortsInterval    time.Duration
	PortsTop         int
	PortsMaxSeries   int
	PortsWarn        int

	NodePortCollisions bool
	NodePortRange      string
	HostNetNS          uint64

	// tty is stdout when it is a terminal (nil otherwise): the default
	// --output and the human forms' width.
	tty *terminal
}

// SetFlags registers the flags on fs. The help shows them in the groups of
// traceHelp; each says what it does in a line or two, and docs/ the rest.
func (f *TraceFlags) SetFlags(fs *pflag.FlagSet) {
	// Filters.
	fs.StringVar(&f.Errno, "errno", "EADDRNOTAVAIL,EADDRINUSE,EAGAIN/udp", "errnos to report, by name or number, comma separated; NAME/udp: only from UDP sockets (TCP and unix sockets' EAGAIN, such as a full unix backlog, only when asked for). 'all': every failure but EINPROGRESS, also probes programs make on purpose (marked explain.expected)")
	fs.StringVar(&f.Syscall, "syscall", "connect,bind", "syscalls to trace: connect, bind or both")
	fs.Uint32Var(&f.PID, "pid", 0, "only this process id (filtered in the kernel)")
	fs.StringVar(&f.Comm, "comm", "", "only processes whose comm (the first 15 bytes of the name) is exactly this")
	fs.StringSliceVar(&f.NetNS, "netns", nil, "only these network namespaces: inodes (stat -L -c %i /proc/PID/ns/net) or names in /run/netns, comma separated; each must exist at start (one is filtered in the kernel)")
	fs.StringVar(&f.Cgroup, "cgroup", "", "only processes whose cgroup v2 path starts with this, e.g. /kubepods.slice")
	fs.StringVarP(&f.Namespace, "namespace", "n", "", "only pods in this Kubernetes namespace")
	fs.StringVar(&f.Pod, "pod", "", "only this pod (name)")
	fs.StringVar(&f.Container, "container", "", "only this container (name)")
	fs.StringVarP(&f.Selector, "selector", "l", "", "only pods with these labels: k=v[,k=v...]")
	// Output.
	fs.StringVarP(&f.Output, "output", "o", "", "text: a few lines per failure for a person (the default at a terminal); table: a row per failure with its cause and fix; json: a JSON object per line for log pipelines (the default off a terminal; docs/events.md)")
	fs.StringVar(&f.Explain, "explain", "short", "per failure, what the errno means and what the client printed: short, full (also how every other client words it, about 3.5 KB more per JSON event) or off")
	fs.StringVar(&f.Node, "node", "", "node name in each event (default: $NODE_NAME, else the hostname)")
	fs.DurationVar(&f.SummaryInterval, "summary-interval", time.Minute, "with -o json: a {\"kind\":\"summary\"} record with counts per errno and losses this often (0: never)")
	// Diagnosis.
	fs.BoolVar(&f.Diagnose, "diagnose", true, "per failure, read its netns (port range, sockets toward the destination, who holds them) and give the cause and a fix")
	fs.DurationVar(&f.DiagnoseInterval, "diagnose-interval", time.Second, "at most one netns snapshot per netns, syscall, errno and address this often; failures within it share it")
	fs.DurationVar(&f.DiagnoseWait, "diagnose-wait", pipeline.DefaultDiagnoseWait, "the longest a failure waits for its snapshot; then it goes out saying the cause is not ready (diagnoses_late)")
	fs.BoolVar(&f.SocketIterators, "socket-iterators", true, "read sockets with BPF socket iterators, which show what sock_diag does not (a port taken by bind(), SO_REUSEADDR, TIME_WAIT age); false: sock_diag only")
	fs.BoolVar(&f.NodeDrops, "node-drops", true, "with ETIMEDOUT reported (--errno ETIMEDOUT or all) and --diagnose: watch the node's drops of new connections' first packets (tracepoint skb:kfree_skb), so that a timeout's diagnosis names the layer that dropped its SYNs: the node's SNAT, conntrack, a firewall rule, or none (beyond the node)")
	fs.Float64Var(&f.NodeDropRate, "node-drop-rate", pipeline.DefaultNodeDropRate, "with --node-drops: at most this many drops a second per CPU are read; the kernel counts the others (eaddr_node_drops_missed_total); 0: no limit")
	fs.BoolVar(&f.Async, "async", true, "with --errno all, ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH or ENETUNREACH: also a non-blocking connect() that fails later (\"async\": true)")
	fs.DurationVar(&f.RetryWindow, "retry-window", 50*time.Millisecond, "a failure this soon after the same thread's failure of the same call and address is its retry (\"attempt\": 2, 3, ...)")
	fs.BoolVar(&f.NodePortCollisions, "nodeport-collisions", false, "also report a connect() in the host netns whose kernel-chosen source port is in the NodePort range (kind nodeport_collision), whose reply a NodePort rule can take")
	fs.StringVar(&f.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint64Var(&f.HostNetNS, "host-netns", 0, "inode of the node's network namespace, where NodePorts live and which events call host_network (default: that of pid 1, else of kthreadd, pid 2)")
	// Kubernetes.
	fs.StringVar(&f.CRIEndpoint, "cri-endpoint", "", "container runtime socket that names pods and containers (default: the first of the containerd, k3s, CRI-O and cri-dockerd sockets); one given must be a unix socket at start; without one, events carry pod UIDs only and say why")
	fs.DurationVar(&f.NamesWait, "names-wait", pipeline.DefaultNamesWait, "the longest a failure waits for the runtime to name its pod; then it goes out with the pod UID and says why")
	fs.BoolVar(&f.KubeEvents, "kube-events", false, "also post a Warning Event on the failing pod (kubectl describe pod shows it); in-cluster credentials (deploy/kube-events) or --kubeconfig")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "with --kube-events: the API server and credentials of this kubeconfig's current context")
	fs.Float64Var(&f.KubeEventsQPS, "kube-events-qps", 5, "with --kube-events: at most this many API calls per second from this node (bursts of 10)")
	fs.DurationVar(&f.KubeEventsInterval, "kube-events-interval", 10*time.Minute, "with --kube-events: one Event per pod, reason and destination this long, its count updated")
	fs.DurationVar(&f.KubeEventsUpdate, "kube-events-update-interval", 30*time.Second, "with --kube-events: an Event's count is updated at most this often")
	// Metrics and the port sampler.
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on /metrics and a health check on /healthz at this address, e.g. :9630")
	fs.IntVar(&f.MetricsMaxSeries, "metrics-max-series", 1000, "at most this many syscall/errno/namespace/pod series; later pods count under \"other\"")
	fs.BoolVar(&f.MetricsNoDest, "metrics-no-destination", false, "name no destination in eaddr_ephemeral_ports_in_use, which every scraper can read: one series per netns, its busiest destination's (docs/alerts.md)")
	fs.Float64Var(&f.CloudNATLimit, "cloud-nat-limit", 0, "with --metrics-addr: the connections your cloud's NAT gives toward one destination (AWS NAT gateway: 55000), exported as eaddr_cloud_nat_limit for the alert that sums the nodes' SNAT entries toward a destination (0: not exported)")
	fs.DurationVar(&f.PortsInterval, "ports-interval", pipeline.DefaultPortsInterval, "with --metrics-addr or --kube-events: sample every netns's port use (with --netns, those) this often, before any failure (0: off; docs/alerts.md)")
	fs.IntVar(&f.PortsTop, "ports-top", pipeline.DefaultPortsTop, "the busiest destinations of each netns that the sampler gives a series")
	fs.IntVar(&f.PortsMaxSeries, "ports-max-series", 3000, "at most this many eaddr_ephemeral_ports_* series (the rest counted in eaddr_port_series_cut_total)")
	fs.IntVar(&f.PortsWarn, "warn", pipeline.DefaultPortsWarn, "with --kube-events: a Warning EphemeralPortsNearlyExhausted on a pod whose netns holds this percent of the ports toward one destination, before any connect() fails, and NodeSNATPortsNearlyExhausted on the pod holding the most of the node's SNAT ports toward a destination at this percent of its MASQUERADE range")
	// Tuning.
	fs.StringVar(&f.RateLimit, "rate-limit", "100/s", "at most this many events per second per cgroup, netns, syscall, errno and address, counted in the kernel; the next event says how many were held back (0 or off: no limit)")
	fs.StringVar(&f.RateLimitCgroup, "rate-limit-cgroup", "10x", "and at most this many per cgroup, syscall and errno, whatever the address (a pod failing toward many), counted in the kernel apart (suppressed_cgroup); Nx: N times --rate-limit (0 or off: no limit per cgroup)")
	fs.IntVar(&f.RingSize, "ring-size", tracer.DefaultRingSize, "ring buffer size in bytes, a power of two from the page size up to 256 MiB; what does not fit is counted as lost")
	fs.DurationVar(&f.Flush, "flush-interval", 50*time.Millisecond, "the longest a failure waits in the ring before it is written (0: wake for every failure, which costs more)")
	// The old name of --host-netns, kept so that scripts keep working.
	fs.Uint64Var(&f.HostNetNS, "nodeport-netns", 0, "")
	fs.MarkDeprecated("nodeport-netns", "use --host-netns, as eaddr check and top do")
}

// traceHelp is eaddr trace --help.
var traceHelp = helpDoc{
	usage: "eaddr trace [flags]",
	about: `Trace failed connect() and bind() calls on this node (needs root): by default EADDRNOTAVAIL and
EADDRINUSE, the errnos of exhausted ephemeral ports. Each failure says who (pod, process, netns),
what failed, what the client printed, the cause and the fix. At a terminal it prints that for a
person; elsewhere one JSON object per line. Logs go to stderr; once the probes are attached, a line
containing 'attached' is logged.`,
	examples: []example{
		{"what fails on this node, as it happens", "sudo eaddr trace"},
		{"one pod's failures", "sudo eaddr trace -n shop --pod web-7d9f8b6c5-x2x4q"},
		{"every refused or timed-out connect() too, as JSON lines", "sudo eaddr trace --errno all -o json"},
		{"from a node debug pod (docs/runbook.md)", "kubectl debug node/NODE -it --profile=sysadmin --image=IMAGE -- /eaddr trace \\\n      --cri-endpoint /host/run/containerd/containerd.sock"},
	},
	groups: []flagGroup{
		{"Filters", []string{"errno", "syscall", "pid", "comm", "netns", "cgroup", "namespace", "pod", "container", "selector"}},
		{"Output", []string{"output", "explain", "node", "summary-interval"}},
		{"Diagnosis", []string{"diagnose", "diagnose-interval", "diagnose-wait", "socket-iterators", "node-drops", "node-drop-rate", "async", "retry-window", "nodeport-collisions", "node-port-range", "host-netns"}},
		{"Kubernetes", []string{"cri-endpoint", "names-wait", "kube-events", "kubeconfig", "kube-events-qps", "kube-events-interval", "kube-events-update-interval"}},
		{"Metrics and the port sampler", []string{"metrics-addr", "metrics-max-series", "metrics-no-destination", "ports-interval", "ports-top", "ports-max-series", "warn", "cloud-nat-limit"}},
		{"Tuning", []string{"rate-limit", "rate-limit-cgroup", "ring-size", "flush-interval"}},
	},
	footer: `Exit status: 0 on a clean stop (Ctrl-C, or a reader that closed stdout), 1 on a failure, 2 on bad usage,
3 without the privilege to trace. Fields of the JSON: docs/events.md.`,
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
	netns, err := parseNetNSFlag(f.NetNS)
	if err != nil {
		return err
	}
	if len(netns) == 1 {
		c.Tracer.NetNS = uint32(netns[0]) // filtered in the kernel
	}
	for _, n := range netns {
		c.NetNS = append(c.NetNS, uint32(n))
	}
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
	if c.CgroupRate, err = pipeline.ParseCgroupRate(f.RateLimitCgroup, rate); err != nil {
		return usageErrorf("--rate-limit-cgroup: %v", err)
	}
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
	c.MetricsNoDestination = f.MetricsNoDest
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
	if f.CloudNATLimit < 0 {
		return usageErrorf("--cloud-nat-limit must be 0 or more, not %v", f.CloudNATLimit)
	}
	c.CloudNATLimit = f.CloudNATLimit
	return nil
}

// diagnosis: snapshots and the NodePort check.
func (f *TraceFlags) diagnosis(c *pipeline.Config) error {
	lo, hi, err := parsePortRange(f.NodePortRange)
	if err != nil {
		return usageErrorf("--node-port-range: %v", err)
	}
	c.NodePortLo, c.NodePortHi, c.HostNetNS = lo, hi, f.HostNetNS
	if f.Diagnose {
		if f.DiagnoseInterval <= 0 {
			return usageErrorf("--diagnose-interval must be positive, not %v", f.DiagnoseInterval)
		}
		c.DiagnoseEvery = f.DiagnoseInterval
		c.SocketIterators = f.SocketIterators
		if f.NodeDropRate < 0 {
			return usageErrorf("--node-drop-rate must be 0 or more, not %v", f.NodeDropRate)
		}
		c.NodeDrops, c.NodeDropRate = f.NodeDrops, f.NodeDropRate
		if f.DiagnoseWait <= 0 || f.DiagnoseWait > maxWait {
			return usageErrorf("--diagnose-wait must be from 1ns to %v, not %v", maxWait, f.DiagnoseWait)
		}
		c.DiagnoseWait = f.DiagnoseWait
	}
	if f.NodePortCollisions {
		inode := f.HostNetNS
		if inode == 0 {
			host, err := netdiag.HostInode()
			if err != nil {
				return fmt.Errorf("--nodeport-collisions: finding the host network namespace: %w", err)
			}
			inode = host
		}
		c.Tracer.NodePort = &tracer.NodePortCheck{NetNS: uint32(inode), Lo: uint16(lo), Hi: uint16(hi)}
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
	fs.Usage = func() { writeHelp(stdout, fs, traceHelp, helpWidth(stdout)) }
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
