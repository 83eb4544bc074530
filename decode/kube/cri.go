package kube

import (
	"context"
	"encoding/json"

	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodInfo is what eaddr reports of a pod and container.
type PodInfo struct {
	UID         string
	Name        string
	Namespace   string
	Container   string // empty for the pod's sandbox (pause) process
	ContainerID string
	Image       string
	QoS         string
	Labels      map[string]string // the pod's labels, without the runtime's io.kubernetes.* ones
	NetNS       uint64            // inode of the pod's network namespace, when known
}

// DefaultEndpoints are the CRI sockets tried, in order, when none is given:
// containerd, k3s's containerd, CRI-O, cri-dockerd.
var DefaultEndpoints = []string{
	"/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/cri-dockerd.sock",
}

// Resolver maps container and sandbox IDs to pods through the container
// runtime's CRI socket. It lists every container and sandbox at once and
// caches the result; a lookup that misses refreshes it at most once per
// RefreshEvery, so a storm of events from unknown IDs costs one listing a
// second. Without a reachable runtime it answers nothing and warns once.
// Safe for concurrent use.
type Resolver struct {
	Endpoint     string
	RefreshEvery time.Duration
	Timeout      time.Duration
	MaxEntries   int

	log  *slog.Logger
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient

	mu        sync.Mutex
	byID      map[string]*PodInfo // container and sandbox IDs
	byNetNS   map[uint64]*PodInfo // sandbox netns inode -> pod (no container)
	sandboxNS map[string]uint64   // sandbox ID -> netns inode, learned once
	last      time.Time
	Refreshes int
	warned    bool
	err       error
	now       func() time.Time
}

// NewResolver connects to endpoint (a unix socket path, with or without
// unix://), or to the first of DefaultEndpoints that exists. It does not
// fail: without a runtime the Resolver answers nothing, and Err says why.
func NewResolver(endpoint string, log *slog.Logger) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resolver{RefreshEvery: time.Second, Timeout: 2 * time.Second, MaxEntries: 65536, log: log,
		byID: map[string]*PodInfo{}, byNetNS: map[uint64]*PodInfo{}, sandboxNS: map[string]uint64{}, now: time.Now}
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
		r.warnOnce()
		return r
	}
	r.Endpoint = path
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.err = fmt.Errorf("CRI endpoint %s: %w", path, err)
		r.warnOnce()
		return r
	}
	r.conn, r.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	return r
}

// Err is why the resolver cannot answer, or nil.
func (r *Resolver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Len is the number of container and sandbox IDs cached.
func (r *Resolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// Close closes the connection.
func (r *Resolver) Close() error {
	if r.conn != nil {
		return r.conn.Close()
	}
	return nil
}

// Lookup returns the pod of a container or sandbox ID.
func (r *Resolver) Lookup(id string) (*PodInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.byID[id]; ok {
		return p, true
	}
	r.refreshLocked()
	p, ok := r.byID[id]
	return p, ok
}

// PodByNetNS returns the pod whose sandbox owns that network namespace.
func (r *Resolver) PodByNetNS(inode uint64) (*PodInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.byNetNS[inode]; ok {
		return p, true
	}
	r.refreshLocked()
	p, ok := r.byNetNS[inode]
	return p, ok
}

func (r *Resolver) refreshLocked() {
	if r.rt == nil {
		r.warnOnce()
		return
	}
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < r.RefreshEvery {
		return
	}
	r.last = now
	r.Refreshes++
	if err := r.list(); err != nil {
		r.err = err
		r.warnOnce()
		return
	}
	if r.err != nil {
		r.log.Info("container runtime reachable again", "endpoint", r.Endpoint)
	}
	r.err, r.warned = nil, false
}

func (r *Resolver) warnOnce() {
	if !r.warned {
		r.warned = true
		r.log.Warn("no pod names, only pod UIDs and container IDs: the container runtime cannot be asked", "err", r.err)
	}
}

func (r *Resolver) list() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("CRI ListPodSandbox on %s: %w", r.Endpoint, err)
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("CRI ListContainers on %s: %w", r.Endpoint, err)
	}
	byID := make(map[string]*PodInfo, len(sbs.Items)+len(cs.Containers))
	byNetNS := map[uint64]*PodInfo{}
	pods := map[string]*PodInfo{}
	for _, sb := range sbs.Items {
		if sb.Metadata == nil {
			continue
		}
		p := &PodInfo{UID: sb.Metadata.Uid, Name: sb.Metadata.Name, Namespace: sb.Metadata.Namespace, ContainerID: sb.Id, Labels: podLabels(sb.Labels)}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			p.NetNS = r.sandboxNetNS(ctx, sb.Id)
			if p.NetNS != 0 {
				byNetNS[p.NetNS] = p
			}
		}
		pods[sb.Id] = p
		byID[sb.Id] = p
	}
	for _, c := range cs.Containers {
		pod := pods[c.PodSandboxId]
		if pod == nil || c.Metadata == nil {
			continue
		}
		p := *pod
		p.Container, p.ContainerID = c.Metadata.Name, c.Id
		if c.Image != nil {
			p.Image = c.Image.Image
		}
		if p.Image == "" || strings.HasPrefix(p.Image, "sha256:") {
			if c.ImageRef != "" {
				p.Image = c.ImageRef
			}
		}
		byID[c.Id] = &p
		if len(byID) >= r.MaxEntries {
			break
		}
	}
	r.byID, r.byNetNS = byID, byNetNS
	return nil
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
// status (containerd and CRI-O report it), once per sandbox.
func (r *Resolver) sandboxNetNS(ctx context.Context, id string) uint64 {
	if ns, ok := r.sandboxNS[id]; ok {
		return ns
	}
	st, err := r.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return 0
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if s, ok := st.Info["info"]; ok {
		_ = json.Unmarshal([]byte(s), &info)
	}
	var ns uint64
	if info.Pid > 0 {
		var sta unix.Stat_t
		if unix.Stat("/proc/"+strconv.Itoa(info.Pid)+"/ns/net", &sta) == nil {
			ns = sta.Ino
		}
	}
	if len(r.sandboxNS) >= r.MaxEntries {
		clear(r.sandboxNS)
	}
	r.sandboxNS[id] = ns
	return ns
}
