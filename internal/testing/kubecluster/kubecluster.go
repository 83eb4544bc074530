// Package kubecluster starts a real single-node Kubernetes cluster for a
// test: etcd and kube-apiserver (internal/testing/kubetest), kube-controller-manager,
// kube-scheduler, a private containerd with a CNI bridge, a kubelet and
// kube-proxy, all of kubetest.Version, built from the Go module proxy into
// kubetest's cache. The real kubectl drives it.
//
// # Host
//
// The node's address (NodeIP, 10.214.X.1) sits on a bridge of its own with
// no port (there is no dummy NIC driver everywhere, and the kubelet refuses a
// loopback address); the API server binds it, so that pods reach it through
// the "kubernetes" Service. Pods live on a second bridge (10.215.X.0/24, the
// bridge plugin with host-local IPAM) with routes to the Service range and
// the node only: nothing is routed off the machine and nothing is
// masqueraded. NodePorts answer on the node IP only.
//
// containerd serves CRI on /run/containerd/containerd.sock, where a
// stock node has it and where deploy/'s manifests mount it from; Start skips
// when something is there already. Its root and state live in the cluster's
// directory (/tmp/eaddr-kc-*). The kubelet's root directory and pod logs
// (PodLogsDir) are there too; its pods' cgroups are under CgroupRoot
// (/eaddr-kubelet/kubepods/...), so that it never sees, nor removes as
// orphans, the pods of internal/testing/critest (/kubepods/...), and they never see
// its own.
//
// Every change to the host is written to a state file (State) before it is
// made; Stop (a t.Cleanup, run also when the test fails or panics) and
// `make cluster-down` (Teardown, from the file alone) undo it: processes by
// pid and start time, pods through CRI, mounts, KUBE-* iptables chains, the
// sysctls the kubelet sets (vm.overcommit_memory, kernel.panic, ...),
// bridges, cgroups, and the host directories the components created.
//
// # Settings that these machines need
//
//   - containerd: restrict_oom_score_adj (no CAP_SYS_RESOURCE).
//   - kubelet: the cgroupfs driver, failCgroupV1 false (hybrid cgroups),
//     failSwapOn false; client certificates from a CA of its own, which the
//     API server's kubelet client certificate comes from (exec, logs).
//   - kube-apiserver: --kubelet-preferred-address-types=InternalIP,Hostname.
//   - kube-proxy: iptables mode, conntrack settings 0 (left alone).
//   - No CoreDNS: pods have no DNS.
package kubecluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/child"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// CgroupRoot is the kubelet's --cgroup-root: its pods are at
// CgroupRoot/kubepods/{besteffort/,burstable/,}pod<UID>/<container ID>.
const CgroupRoot = "/eaddr-kubelet"

// CRISocket is where containerd serves CRI, as on a stock node.
const CRISocket = "/run/containerd/containerd.sock"

// NodeName is the node's name.
const NodeName = "eaddr-node"

// ReadyTimeout bounds each wait of Start (a component's health, the node's
// Ready condition).
const ReadyTimeout = 90 * time.Second

// Options change Start.
type Options struct {
	// StatePath is where the state file goes; the cluster's directory when
	// empty. `make cluster-up` puts it where `make cluster-down` finds it.
	StatePath string

	// PodLogsDir is the kubelet's podLogsDir; a directory of the cluster's
	// own when empty. Set it to /var/log/pods for a log agent that reads a
	// node's usual path: the pods' directories the cluster adds there are
	// removed by Stop, nothing else in it is touched.
	PodLogsDir string
}

// Cluster is a running single-node cluster.
type Cluster struct {
	Kubeconfig string            // the admin's (system:masters) kubeconfig
	Kubectl    *kubetest.Kubectl // the real kubectl of kubetest.Version with Kubeconfig
	NodeName   string
	NodeIP     string
	CRISocket  string // containerd's CRI socket (host path)
	PodSubnet  string
	PodLogsDir string // the kubelet's podLogsDir: NAMESPACE_POD_UID/CONTAINER/N.log
	Dir        string // everything of the cluster: configs, logs (*.log), data
	API        *kubetest.Server
	StatePath  string

	// ReadyAfter is how long Start took, to a Ready node with the default
	// ServiceAccount made.
	ReadyAfter time.Duration

	t          testing.TB
	state      *State
	podBridge  string
	nodeBridge string
	podGateway string
	bins       map[string]string
	procs      []*child.Process
	stopOnce   sync.Once
}

// Start starts a cluster for t and returns when its node is Ready and pods
// can be made in the default namespace; Stop is registered with t.Cleanup.
// It skips (testenv.Skip: a failure under EADDR_REQUIRE_BPF=1) when not root,
// when a program is missing (naming its Debian package), or when the host
// already has what the cluster would make (a CRI socket, KUBE-* chains, its
// cgroup root); the Kubernetes binaries are built first if not cached. It
// waits while another cluster runs on the machine (LockPath) and first
// restores what a killed one left (TeardownStale).
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with Options.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bins := prerequisites(t)
	t.Cleanup(LockHost(t)) // released after Stop, which is registered later
	if err := TeardownStale(t.Logf); err != nil {
		t.Fatalf("kubecluster: a cluster left by a killed process: %v", err)
	}
	checkHost(t)
	begin := time.Now()
	c := newCluster(t, opts, bins)
	t.Cleanup(c.Stop)
	c.must("node network", c.setupNetwork())
	c.must("cgroup root", makeCgroupRoot(CgroupRoot))
	c.startAPIServer()
	t.Cleanup(c.Stop) // again: before kubetest's cleanup, which stops the API server
	c.must("containerd", c.startContainerd())
	c.must("controller-manager and scheduler", c.startControllers())
	c.must("kubelet", c.startKubelet())
	c.must("kube-proxy", c.startKubeProxy())
	c.must("default ServiceAccount", c.waitObject("/api/v1/namespaces/default/serviceaccounts/default"))
	c.ReadyAfter = time.Since(begin)
	t.Logf("kubecluster: node %s (%s) Ready, kubeconfig %s, in %s (state %s)", c.NodeName, c.NodeIP,
		c.Kubeconfig, c.ReadyAfter.Round(100*time.Millisecond), c.StatePath)
	return c
}

// must fails the test when err is set, with the logs of what failed.
func (c *Cluster) must(what string, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("kubecluster: %s: %v", what, err)
	}
}

// newCluster makes the cluster's directory and state file.
func newCluster(t testing.TB, opts Options, bins map[string]string) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "eaddr-kc-")
	if err != nil {
		t.Fatal(err)
	}
	x := make([]byte, 3)
	rand.Read(x)
	third := int(x[0])
	suffix := fmt.Sprintf("%x", x) // link names have at most 15 bytes
	c := &Cluster{
		t: t, Dir: dir, bins: bins,
		NodeName:   NodeName,
		NodeIP:     fmt.Sprintf("10.214.%d.1", third),
		PodSubnet:  fmt.Sprintf("10.215.%d.0/24", third),
		podGateway: fmt.Sprintf("10.215.%d.1", third),
		podBridge:  "eaddrkp" + suffix,
		nodeBridge: "eaddrkn" + suffix,
		CRISocket:  CRISocket,
		PodLogsDir: cmp.Or(opts.PodLogsDir, filepath.Join(dir, "pod-logs")),
		StatePath:  opts.StatePath,
	}
	if c.StatePath == "" {
		c.StatePath = filepath.Join(dir, "state.json")
	}
	c.state = &State{
		path: c.StatePath, Dir: dir, Owner: procOf("owner", os.Getpid()), CRISocket: c.CRISocket,
		ConfigPath: filepath.Join(dir, "containerd", "config.toml"), CgroupRoot: CgroupRoot,
		PodSubnet: c.PodSubnet, KubeProxy: bins["kube-proxy"], Sysctls: readSysctls(), Created: missingPaths(), NftTables: nftTables(),
		PodLogsDir: c.PodLogsDir, PodLogsBefore: dirEntries(c.PodLogsDir),
	}
	if err := c.state.save(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("kubecluster: state file: %v", err)
	}
	for _, d := range []string{"logs", "pki", "kubelet", "containerd", "cni/net.d", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Stop stops every component and restores the host (Teardown); when the
// test has failed it first logs the tails of the components' logs. Safe to
// call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.t.Failed() {
			c.DumpLogs()
		}
		begin := time.Now()
		if err := Teardown(c.state, c.t.Logf); err != nil {
			c.t.Errorf("kubecluster: restoring the host: %v", err)
		}
		if c.API != nil {
			c.API.Stop()
		}
		c.t.Logf("kubecluster: stopped and cleaned up in %s", time.Since(begin).Round(time.Millisecond))
	})
}

// DumpLogs logs the last lines of each component's log.
func (c *Cluster) DumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	for _, l := range logs {
		c.t.Logf("kubecluster: last lines of %s:\n%s", l, tailFile(l, 40))
	}
}

// record adds a started process to the state file.
func (c *Cluster) record(p Proc) error {
	return c.state.change(func() { c.state.Procs = append(c.state.Procs, p) })
}

// start starts a component with its log in Dir/logs/NAME.log and records it.
// A cached binary (kubelet-v1.34.2) runs through a link named NAME in
// Dir/bin, so that its comm is NAME as on a stock node: eaddr tells the
// kubelet's connects by that comm.
func (c *Cluster) start(name string, args ...string) (*child.Process, error) {
	bin := c.bins[name]
	if filepath.Base(bin) != name {
		link := filepath.Join(c.Dir, "bin", name)
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			return nil, err
		}
		if err := os.Symlink(bin, link); err != nil {
			return nil, err
		}
		bin = link
	}
	p, err := startProcess(name, c.logPath(name), bin, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, c.record(procOf(name, p.Cmd.Process.Pid))
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.Dir, "logs", name+".log") }

// setupNetwork makes the node's bridge with the node IP.
func (c *Cluster) setupNetwork() error {
	nodeBridge := c.nodeBridge
	if err := c.state.change(func() { c.state.Bridges = []string{nodeBridge, c.podBridge} }); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", nodeBridge, "type", "bridge"},
		{"addr", "add", c.NodeIP + "/32", "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls cond until it returns nil, p (when set) exits, or
// ReadyTimeout passes.
func waitFor(p *child.Process, cond func() error) error {
	deadline := time.Now().Add(ReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.Name, p.Err(), p.LogPath, tailFile(p.LogPath, 40))
		}
		if last = cond(); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p != nil {
		return fmt.Errorf("not within %s: %v; last lines of %s:\n%s", ReadyTimeout, last, p.LogPath, tailFile(p.LogPath, 40))
	}
	return fmt.Errorf("not within %s: %v", ReadyTimeout, last)
}

// get GETs path from the API server as the admin.
func (c *Cluster) get(path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.API.Do(ctx, kubetest.Request{Method: "GET", Path: path})
	if err != nil {
		return nil, err
	}
	return resp.Body, resp.Err()
}

// waitObject waits until GET path answers 200.
func (c *Cluster) waitObject(path string) error {
	return waitFor(nil, func() error { _, err := c.get(path); return err })
}

// ImportImage imports the OCI archive tarPath into the node's containerd
// (namespace k8s.io, unpacked for its snapshotter), as an operator does with
// `ctr -n k8s.io images import`, and returns the names ctr gave it.
func (c *Cluster) ImportImage(tarPath string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bins["ctr"], "--address", c.CRISocket, "--namespace", "k8s.io",
		"images", "import", "--snapshotter", "native", tarPath)
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root", "TMPDIR=" + c.Dir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ctr images import %s: %v\n%s", tarPath, err, out)
	}
	// "unpacking localhost/eaddr:v1 (sha256:...)...done"
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "unpacking" {
			names = append(names, f[1])
		}
	}
	return names, nil
}

// nodeReady is nil when the node's Ready condition is True.
func (c *Cluster) nodeReady() error {
	b, err := c.get("/api/v1/nodes/" + c.NodeName)
	if err != nil {
		return err
	}
	var node struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string }
		}
	}
	if err := json.Unmarshal(b, &node); err != nil {
		return err
	}
	i := slices.IndexFunc(node.Status.Conditions, func(x struct{ Type, Status, Reason, Message string }) bool { return x.Type == "Ready" })
	if i < 0 {
		return fmt.Errorf("node %s has no Ready condition yet", c.NodeName)
	}
	if r := node.Status.Conditions[i]; r.Status != "True" {
		return fmt.Errorf("node %s not Ready: %s: %s", c.NodeName, r.Reason, r.Message)
	}
	return nil
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return lastLines(string(b), n)
}
