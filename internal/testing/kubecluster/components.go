package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// programs are looked up in hostPath, each with its Debian package.
var programs = [][2]string{
	{"containerd", "containerd"}, {"ctr", "containerd"}, {"containerd-shim-runc-v2", "containerd"},
	{"runc", "runc"}, {"ip", "iproute2"}, {"iptables", "iptables"}, {"iptables-save", "iptables"},
	{"iptables-restore", "iptables"}, {"etcd", "etcd-server"}, {"nft", "nftables"},
}

// files must exist, with their packages.
var files = [][2]string{
	{critest.BusyboxPath, "busybox-static"},
	{filepath.Join(critest.CNIBinDir, "bridge"), "containernetworking-plugins"},
	{filepath.Join(critest.CNIBinDir, "host-local"), "containernetworking-plugins"},
	{filepath.Join(critest.CNIBinDir, "loopback"), "containernetworking-plugins"},
}

// prerequisites skips when something Start needs is missing, and returns
// the programs' paths, the Kubernetes binaries built if they are not cached.
func prerequisites(t testing.TB) map[string]string {
	t.Helper()
	testenv.RequireRoot(t)
	bins := map[string]string{}
	var missing []string
	for _, p := range programs {
		path, err := lookHostPath(p[0])
		if err != nil {
			missing = append(missing, testenv.NotInstalled(p[0], p[1]))
		}
		bins[p[0]] = path
	}
	for _, f := range files {
		if _, err := os.Stat(f[0]); err != nil {
			missing = append(missing, testenv.NotInstalled(f[0], f[1]))
		}
	}
	if len(missing) > 0 {
		testenv.Skip(t, "kubecluster: "+strings.Join(missing, "; "))
	}
	for _, name := range kubetest.Commands {
		bins[name] = kubetest.Binary(t, name)
	}
	return bins
}

// checkHost skips when the host already has what the cluster would make.
func checkHost(t testing.TB) {
	t.Helper()
	if _, err := os.Lstat(CRISocket); err == nil {
		testenv.Skip(t, "kubecluster: "+CRISocket+" exists: a container runtime serves this host already (or `make cluster-down` was not run after a killed cluster)")
	}
	if left := kubeChains(); len(left) > 0 {
		testenv.Skip(t, fmt.Sprintf("kubecluster: the host has KUBE-* iptables chains already (a kube-proxy or kubelet runs here, or `make cluster-down` was not run): %v", left))
	}
	if d := critest.CgroupTree(CgroupRoot); len(d) > 0 {
		testenv.Skip(t, fmt.Sprintf("kubecluster: %s exists (a cluster runs, or `make cluster-down` was not run after a killed one)", d[len(d)-1]))
	}
}

// LockPath serialises clusters on a machine: there is one
// /run/containerd/containerd.sock, one set of KUBE-* chains and one
// CgroupRoot. Start holds an flock on it until Stop has restored the host,
// so test binaries (and `make cluster-up`) run their clusters one after the
// other instead of failing; the kernel drops the lock of a killed process.
const LockPath = "/run/eaddr-kubecluster.lock"

// held counts this process's holds of LockPath: a test that looks at the
// host before and after its cluster (TestCluster) holds it around Start,
// which takes it again. Another open of the file would wait for itself.
var held struct {
	sync.Mutex
	n       int
	release func()
}

// LockHost takes the flock of LockPath, waiting while another cluster runs
// (until the test's deadline), and returns its release; this process may
// take it again while it holds it.
func LockHost(t testing.TB) func() {
	t.Helper()
	held.Lock()
	defer held.Unlock()
	if held.n == 0 {
		held.release = lockHost(t)
	}
	held.n++
	return func() {
		held.Lock()
		defer held.Unlock()
		if held.n--; held.n == 0 {
			held.release()
		}
	}
}

// lockHost takes the flock of LockPath, waiting while another cluster runs
// (until the test's deadline), and returns its release.
func lockHost(t testing.TB) func() {
	t.Helper()
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("kubecluster: %v", err)
	}
	deadline := time.Now().Add(time.Hour)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			deadline = d.Add(-2 * time.Minute)
		}
	}
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("kubecluster: flock %s: %v (another cluster runs on this machine)", LockPath, err)
		}
		if !logged {
			t.Logf("kubecluster: another cluster runs on this machine (%s is locked): waiting", LockPath)
			logged = true
		}
		time.Sleep(time.Second)
	}
}

// lookHostPath finds a program in hostPath.
func lookHostPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(hostPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, hostPath)
}

// users of the API server's token file, one per component.
var users = []kubetest.User{
	{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}},
	{Name: "system:kube-controller-manager"},
	{Name: "system:kube-scheduler"},
	{Name: "system:kube-proxy"},
}

// startAPIServer starts etcd and kube-apiserver on the node IP (kubetest),
// with the Node authorizer and the kubelet client certificate, and writes the
// components' kubeconfigs.
func (c *Cluster) startAPIServer() {
	t := c.t
	t.Helper()
	cert, key, err := writePKI(filepath.Join(c.Dir, "pki"))
	c.must("PKI", err)
	c.API = kubetest.StartWith(t, kubetest.Options{
		Address:           c.NodeIP,
		Users:             users,
		AuthorizationMode: "Node,RBAC",
		ExtraArgs: []string{
			"--kubelet-client-certificate=" + cert,
			"--kubelet-client-key=" + key,
			"--kubelet-preferred-address-types=InternalIP,Hostname",
		},
	})
	apiserver, etcd := c.API.Pids()
	c.must("state", c.state.change(func() {
		// Teardown stops them after everything else (it walks Procs backwards).
		c.state.Procs = append([]Proc{procOf("etcd", etcd), procOf("kube-apiserver", apiserver)}, c.state.Procs...)
	}))
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	c.must("kubeconfig", writeKubeconfig(c.Kubeconfig, c.API, c.API.Token))
	for _, u := range users {
		c.must("kubeconfig", writeKubeconfig(c.kubeconfigOf(u.Name), c.API, c.API.Tokens[u.Name]))
	}
	c.Kubectl = kubetest.NewKubectl(t)
	c.Kubectl.Kubeconfig = c.Kubeconfig
}

// kubeconfigOf is the path of user's kubeconfig.
func (c *Cluster) kubeconfigOf(user string) string {
	name := strings.TrimPrefix(strings.ReplaceAll(user, ":", "-"), "system-")
	return filepath.Join(c.Dir, name+".kubeconfig")
}

// startContainerd writes containerd's and CNI's configuration, starts
// containerd, waits for CRI to report the runtime and network ready, and
// imports the busybox image (the sandbox image, and the tests' workloads').
func (c *Cluster) startContainerd() error {
	if err := os.WriteFile(filepath.Join(c.cniConfDir(), "10-eaddr-kubecluster.conflist"), []byte(c.cniConfig()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.state.ConfigPath, []byte(c.containerdConfig()), 0o600); err != nil {
		return err
	}
	p, err := c.start("containerd", "--config", c.state.ConfigPath)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+c.CRISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	err = waitFor(p, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
		if err != nil {
			return err
		}
		for _, cond := range st.GetStatus().GetConditions() {
			if !cond.Status {
				return fmt.Errorf("%s: %s %s", cond.Type, cond.Reason, cond.Message)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	img := filepath.Join(c.Dir, "busybox.tar")
	if _, err := critest.BuildImage(img); err != nil {
		return err
	}
	_, err = c.ImportImage(img)
	return err
}

// startControllers starts kube-controller-manager and kube-scheduler, no
// leader election, no serving port.
func (c *Cluster) startControllers() error {
	_, err := c.start("kube-controller-manager",
		"--kubeconfig="+c.kubeconfigOf("system:kube-controller-manager"),
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(c.API.Dir, "sa.key"),
		"--root-ca-file="+c.API.CertFile,
		"--allocate-node-cidrs=false",
		"--cluster-name=eaddr")
	if err != nil {
		return err
	}
	_, err = c.start("kube-scheduler",
		"--kubeconfig="+c.kubeconfigOf("system:kube-scheduler"),
		"--secure-port=0",
		"--leader-elect=false")
	return err
}

// startKubelet starts the kubelet and waits until its node is Ready.
func (c *Cluster) startKubelet() error {
	ports, err := kubetest.FreePorts(2)
	if err != nil {
		return err
	}
	config := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(c.kubeletConfig(ports[0], ports[1])), 0o600); err != nil {
		return err
	}
	p, err := c.start("kubelet",
		"--config="+config,
		"--kubeconfig="+c.kubeconfigOf("system:node:"+NodeName),
		"--root-dir="+filepath.Join(c.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(c.Dir, "kubelet", "pki"),
		"--hostname-override="+c.NodeName,
		"--node-ip="+c.NodeIP)
	if err != nil {
		return err
	}
	if err := c.state.change(func() { c.state.Iptables = true }); err != nil {
		return err
	}
	return waitFor(p, c.nodeReady)
}

// startKubeProxy starts kube-proxy and waits for its /healthz.
func (c *Cluster) startKubeProxy() error {
	ports, err := kubetest.FreePorts(2)
	if err != nil {
		return err
	}
	config := filepath.Join(c.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(config, []byte(c.kubeProxyConfig(c.kubeconfigOf("system:kube-proxy"), ports[0], ports[1])), 0o600); err != nil {
		return err
	}
	p, err := c.start("kube-proxy", "--config="+config)
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz"
	hc := &http.Client{Timeout: 2 * time.Second}
	return waitFor(p, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}
