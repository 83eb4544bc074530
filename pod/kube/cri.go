package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eaddr/eaddr/decode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eaddr/eaddr/internal/netns"
)

// DefaultEndpoints are the CRI sockets tried, in order, when none is given:
// containerd, k3s's containerd, CRI-O, cri-dockerd.
var DefaultEndpoints = []string{
	"/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/cri-dockerd.sock",
}

// Status says what Names knows of an ID.
type Status int

const (
	Found       Status = iota // the names are in the cache
	Pending                   // asked; the answer may come within a CRI deadline
	Unavailable               // not now: the reason says why; asking again later may work
)

// Resolver names containers and pods through the container runtime's CRI
// socket, off the caller's path: Names answers from a cache at once and hands
// a miss to one goroutine, which asks the runtime directly for that ID
// (ListContainers by ID, PodSandboxStatus) with a deadline. A runtime that
// does not answer in time is marked down and retried with back-off; while it
// is down every miss is Unavailable at once, and that is logged once, not per
// event. Safe for concurrent use.
type Resolver struct {
	Endpoint   string
	Timeout    time.Duration // per CRI call
	MaxEntries int

	log  *slog.Logger
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
	reqs chan string // IDs (64 hex), "uid:<pod uid>", or "list"
	done chan struct{}
	stop context.CancelFunc

	mu       sync.Mutex
	byID     map[string]*decode.Pod     // container and sandbox IDs
	byUID    map[string]*decode.Pod     // pod UID -> its sandbox
	byCookie map[uint64]*decode.Pod     // sandbox netns cookie -> its sandbox
	byIP     map[netip.Addr]*decode.Pod // a ready sandbox's own IP (not the node's) -> it, from the last list only
	ipsOf    map[string][]netip.Addr    // sandbox ID -> its IPs, as PodSandboxStatus said
	neg      map[string]negative        // IDs the runtime does not know, for negativeTTL
	inflight map[string]bool
	err      error     // why the runtime cannot be asked, nil when it can
	downTill time.Time // no calls before this (back-off)
	backoff  time.Duration
	lastList time.Time

	// Counters: CRI calls made, calls that failed or timed out, lookups
	// refused because the queue was full, requests answered (or given up):
	// a caller holding events looks again only when Answered moved.
	Calls, Failures, QueueFull, Answered atomic.Uint64
	now                                  func() time.Time
}

type negative struct {
	why   string
	until time.Time
}

const (
	negativeTTL = 5 * time.Second
	maxBackoff  = 30 * time.Second
	listEvery   = 30 * time.Second
)

// NewResolver connects to endpoint (a unix socket path, with or without
// unix://), or to the first of DefaultEndpoints that exists, and starts the
// lookup goroutine. It does not fail: without a runtime the Resolver answers
// Unavailable with the reason. Close stops it. A runtime that cannot be
// asked is logged as a warning when one was given (endpoint) or is expected
// (podsExpected: the node has pod cgroups), and otherwise only at debug
// level: a machine without Kubernetes has nothing to warn about, and a
// check run from cron mails every line it logs.
func NewResolver(endpoint string, podsExpected bool, log *slog.Logger) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resolver{Timeout: time.Second, MaxEntries: 65536, log: log, reqs: make(chan string, 1024),
		done: make(chan struct{}), byID: map[string]*decode.Pod{}, byUID: map[string]*decode.Pod{},
		byCookie: map[uint64]*decode.Pod{}, byIP: map[netip.Addr]*decode.Pod{}, ipsOf: map[string][]netip.Addr{}, neg: map[string]negative{}, inflight: map[string]bool{}, now: time.Now}
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" {
		for _, p := range DefaultEndpoints {
			if st, err := os.Stat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
				path = p
				break
			}
		}
	}
	if path == "" {
		r.err = fmt.Errorf("no container runtime socket found (tried %s; set --cri-endpoint)", strings.Join(DefaultEndpoints, ", "))
	} else if st, err := os.Stat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		r.err = fmt.Errorf("CRI endpoint %s is not a unix socket (%v)", path, err)
	} else if conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		r.err = fmt.Errorf("CRI endpoint %s: %w", path, err)
	} else {
		r.Endpoint, r.conn, r.rt = path, conn, runtimeapi.NewRuntimeServiceClient(conn)
	}
	if r.err != nil {
		if endpoint != "" || podsExpected {
			r.log.Warn("no pod names, only pod UIDs and container IDs: the container runtime cannot be asked", "err", r.err)
		} else {
			r.log.Debug("no container runtime and no pods on this node: events name no pods", "err", r.err)
		}
		close(r.done)
		return r
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go r.run(ctx)
	r.request("list")
	return r
}

// Len is the number of container and sandbox IDs cached.
func (r *Resolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// Close stops the lookup goroutine and closes the connection.
func (r *Resolver) Close() error {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	if r.conn != nil {
		return r.conn.Close()
	}
	return nil
}

// Key is what Names is asked for: a container or sandbox ID, or, for a
// pod-level cgroup (no container), the pod's UID. Callers build it once.
func Key(id, uid string) string {
	if id != "" {
		return id
	}
	return "uid:" + uid
}

// Names returns the pod and container of key (see Key). It never waits: a
// miss is asked in the background (Pending) unless the runtime is down or
// the ID is known not to exist (Unavailable, with why). It does not allocate.
func (r *Resolver) Names(key string) (p *decode.Pod, st Status, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := strings.CutPrefix(key, "uid:"); ok {
		p = r.byUID[uid]
	} else {
		p = r.byID[key]
	}
	if p != nil {
		return p, Found, ""
	}
	if r.err != nil && (r.rt == nil || r.now().Before(r.downTill)) {
		return nil, Unavailable, r.err.Error()
	}
	if n, ok := r.neg[key]; ok && r.now().Before(n.until) {
		return nil, Unavailable, n.why
	}
	if r.inflight[key] {
		return nil, Pending, ""
	}
	select {
	case r.reqs <- key:
		r.inflight[key] = true
		return nil, Pending, ""
	default:
		r.QueueFull.Add(1)
		return nil, Unavailable, "too many runtime lookups queued"
	}
}

// PodByNetNSCookie returns the pod whose sandbox owns the network namespace
// with that cookie, from what the runtime said; it never waits.
func (r *Resolver) PodByNetNSCookie(cookie uint64) (*decode.Pod, bool) {
	if cookie == 0 {
		return nil, false
	}
	r.mu.Lock()
	p, ok := r.byCookie[cookie]
	stale := r.now().Sub(r.lastList) > time.Second
	r.mu.Unlock()
	if !ok && stale {
		r.request("list")
	}
	return p, ok
}

// Healthy is false while the runtime is not answering; why says what failed.
func (r *Resolver) Healthy() (ok bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return false, r.err.Error()
	}
	return true, ""
}

func (r *Resolver) request(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight[key] || r.rt == nil {
		return
	}
	select {
	case r.reqs <- key:
		r.inflight[key] = true
	default:
		r.QueueFull.Add(1)
	}
}

func (r *Resolver) run(ctx context.Context) {
	defer close(r.done)
	tick := time.NewTicker(listEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.request("list")
		case key := <-r.reqs:
			r.serve(ctx, key)
			r.mu.Lock()
			delete(r.inflight, key)
			r.mu.Unlock()
			r.Answered.Add(1)
		}
	}
}

// serve answers one request, unless the runtime is in back-off.
func (r *Resolver) serve(ctx context.Context, key string) {
	r.mu.Lock()
	down := r.err != nil && r.now().Before(r.downTill)
	r.mu.Unlock()
	if down {
		return // Names answers Unavailable until the back-off ends
	}
	var err error
	switch {
	case key == "list":
		err = r.list(ctx)
	case strings.HasPrefix(key, "uid:"):
		err = r.list(ctx)
		r.mu.Lock()
		if r.byUID[key[4:]] == nil && err == nil {
			r.negative(key, "no sandbox of this pod UID is known to the runtime")
		}
		r.mu.Unlock()
	default:
		err = r.lookup(ctx, key)
	}
	r.health(err)
}

// health records a call's outcome: a failure marks the runtime down with
// back-off (logged on the transition), a success brings it back.
func (r *Resolver) health(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.err != nil {
			r.log.Info("container runtime answers again: pod names are back", "endpoint", r.Endpoint)
		}
		r.err, r.backoff = nil, 0
		return
	}
	r.Failures.Add(1)
	r.backoff = min(max(2*r.backoff, time.Second), maxBackoff)
	r.downTill = r.now().Add(r.backoff)
	if r.err == nil {
		r.log.Warn("container runtime is not answering: events carry pod UIDs and container IDs only until it does; retrying with back-off",
			"endpoint", r.Endpoint, "err", err)
	}
	r.err = err
}

func (r *Resolver) call(ctx context.Context) (context.Context, context.CancelFunc) {
	r.Calls.Add(1)
	return context.WithTimeout(ctx, r.Timeout)
}

// lookup asks for one container ID, or a sandbox ID when no container has it.
func (r *Resolver) lookup(ctx context.Context, id string) error {
	c, err := r.container(ctx, id)
	if err != nil {
		return err
	}
	sandboxID := id
	if c != nil {
		sandboxID = c.PodSandboxId
	}
	pod, err := r.sandbox(ctx, sandboxID)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case pod == nil && c == nil:
		r.negative(id, "the runtime knows no container or sandbox with this ID (removed?)")
	case pod == nil:
		r.negative(id, "the runtime knows the container but not its sandbox "+sandboxID)
	case c == nil:
		r.storeLocked(id, pod)
	default:
		r.storeLocked(id, containerInfo(pod, c))
	}
	return nil
}

func (r *Resolver) container(ctx context.Context, id string) (*runtimeapi.Container, error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers on %s: %w", r.Endpoint, err)
	}
	for _, c := range resp.Containers {
		if c.Id == id && c.Metadata != nil {
			return c, nil
		}
	}
	return nil, nil
}

// sandbox returns the pod of a sandbox ID, from the cache or PodSandboxStatus;
// nil when the runtime does not know it.
func (r *Resolver) sandbox(ctx context.Context, id string) (*decode.Pod, error) {
	r.mu.Lock()
	p := r.byID[id]
	r.mu.Unlock()
	if p != nil && p.Container == "" {
		return p, nil
	}
	cctx, cancel := r.call(ctx)
	defer cancel()
	st, err := r.rt.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CRI PodSandboxStatus on %s: %w", r.Endpoint, err)
	}
	if st.Status == nil || st.Status.Metadata == nil {
		return nil, nil
	}
	m := st.Status.Metadata
	p = &decode.Pod{UID: m.Uid, Name: m.Name, Namespace: m.Namespace, ContainerID: id, Labels: podLabels(st.Status.Labels)}
	var ips []netip.Addr
	if st.Status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		p.NetNS, p.NetNSCookie = sandboxNetNS(st.Info)
		ips = sandboxIPs(st.Status)
	}
	r.mu.Lock()
	r.storeLocked(id, p)
	if len(ips) > 0 {
		r.ipsOf[id] = ips
	}
	r.mu.Unlock()
	return p, nil
}

func containerInfo(pod *decode.Pod, c *runtimeapi.Container) *decode.Pod {
	p := *pod
	p.Container, p.ContainerID = c.Metadata.Name, c.Id
	if c.Image != nil {
		p.Image = c.Image.Image
	}
	if (p.Image == "" || strings.HasPrefix(p.Image, "sha256:")) && c.ImageRef != "" {
		p.Image = c.ImageRef
	}
	return &p
}

// storeLocked caches p under id (and, for a sandbox, under its UID and
// netns cookie); the caches are cleared when full.
func (r *Resolver) storeLocked(id string, p *decode.Pod) {
	if len(r.byID) >= r.MaxEntries {
		clear(r.byID)
		clear(r.byUID)
		clear(r.byCookie)
		clear(r.ipsOf)
	}
	r.byID[id] = p
	delete(r.neg, id)
	if p.Container == "" {
		r.byUID[p.UID] = p
		if p.NetNSCookie != 0 {
			r.byCookie[p.NetNSCookie] = p
		}
	}
}

func (r *Resolver) negative(key, why string) {
	if len(r.neg) >= r.MaxEntries {
		clear(r.neg)
	}
	r.neg[key] = negative{why: why, until: r.now().Add(negativeTTL)}
}

// list caches every sandbox and container the runtime has.
func (r *Resolver) list(ctx context.Context) error {
	cctx, cancel := r.call(ctx)
	defer cancel()
	sbs, err := r.rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("CRI ListPodSandbox on %s: %w", r.Endpoint, err)
	}
	cs, err := r.rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("CRI ListContainers on %s: %w", r.Endpoint, err)
	}
	pods := map[string]*decode.Pod{}
	for _, sb := range sbs.Items {
		if sb.Metadata == nil {
			continue
		}
		p, err := r.sandbox(ctx, sb.Id)
		if err != nil {
			return err
		}
		if p != nil {
			pods[sb.Id] = p
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs.Containers {
		if pod := pods[c.PodSandboxId]; pod != nil && c.Metadata != nil {
			r.storeLocked(c.Id, containerInfo(pod, c))
		}
	}
	// Rebuilt whole: an address of a sandbox gone may be another pod's now.
	clear(r.byIP)
	for id, p := range pods {
		for _, ip := range r.ipsOf[id] {
			r.byIP[ip] = p
		}
	}
	r.lastList = r.now()
	return nil
}

// sandboxIPs are a ready sandbox's own addresses; none for one in the
// node's network namespace (a hostNetwork pod has the node's addresses,
// which are no one pod's).
func sandboxIPs(st *runtimeapi.PodSandboxStatus) []netip.Addr {
	if st.Network == nil || st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		return nil
	}
	var out []netip.Addr
	for _, s := range append([]string{st.Network.Ip}, additionalIPs(st.Network)...) {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func additionalIPs(n *runtimeapi.PodSandboxNetworkStatus) []string {
	var out []string
	for _, a := range n.AdditionalIps {
		out = append(out, a.GetIp())
	}
	return out
}

func podLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if !strings.HasPrefix(k, "io.kubernetes.") {
			out[k] = v
		}
	}
	return out
}

// sandboxNetNS finds the netns of a sandbox from the pid in its verbose
// status (containerd and CRI-O report it): its inode and cookie, read now, so
// a later netns that reuses the inode is not taken for it.
func sandboxNetNS(info map[string]string) (inode, cookie uint64) {
	var v struct {
		Pid int `json:"pid"`
	}
	if s, ok := info["info"]; ok {
		_ = json.Unmarshal([]byte(s), &v)
	}
	if v.Pid <= 0 {
		return 0, 0
	}
	ns, err := netns.Open("/proc/" + strconv.Itoa(v.Pid) + "/ns/net")
	if err != nil {
		return 0, 0
	}
	defer ns.Close()
	c, err := ns.Cookie()
	if err != nil {
		return ns.Inode(), 0
	}
	return ns.Inode(), c
}

// PodByNetNS returns the pod whose sandbox owns the netns with that inode,
// listing the runtime first (blocking, with the CRI deadline) when the last
// list is older than a second. For `eaddr check`, which names the pod of each
// netns it audits now; the event path uses PodByNetNSCookie, which never waits.
func (r *Resolver) PodByNetNS(inode uint64) (*decode.Pod, bool) {
	if r.rt == nil || inode == 0 {
		return nil, false
	}
	r.mu.Lock()
	stale := r.now().Sub(r.lastList) > time.Second
	r.mu.Unlock()
	if stale {
		r.health(r.list(context.Background()))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.byUID {
		if p.NetNS == inode {
			return p, true
		}
	}
	return nil, false
}

// PodByIP returns the pod on this node whose sandbox has the address ip
// (its own: a hostNetwork pod has none), listing the runtime first
// (blocking, with the CRI deadline) when the last list is older than a
// second: an address is reused by another pod once its own is gone, so only
// a fresh list names it. For the diagnosis worker, never the reader.
func (r *Resolver) PodByIP(ip netip.Addr) (*decode.Pod, bool) {
	if r.rt == nil || !ip.IsValid() {
		return nil, false
	}
	r.mu.Lock()
	stale := r.now().Sub(r.lastList) > time.Second
	down := r.err != nil && r.now().Before(r.downTill) // backing off: not asked again yet
	r.mu.Unlock()
	if down {
		return nil, false
	}
	if stale {
		if err := r.list(context.Background()); err != nil {
			r.health(err)
			return nil, false
		}
		r.health(nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.byIP[ip.Unmap()]
	return p, ok
}
