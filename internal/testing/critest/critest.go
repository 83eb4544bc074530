// Package critest gives eaddr's integration tests a real, Kubernetes-like
// node: a private containerd (its own root, state directory, socket and
// config) driven through the CRI API exactly as a kubelet would, running pods
// built from a local busybox image.
//
// The tests use it to prove that an event coming from a container maps back to
// the pod name, namespace, pod UID, container name and container ID.
//
// Everything a Runtime creates is private to it and removed by the cleanup
// registered by Start, even when the test fails:
//
//   - a directory /tmp/eaddr-cri-* with containerd's root and state, its
//     socket, config.toml, log, CNI config and IPAM state, and pod logs;
//   - the containerd process, the containerd-shim-runc-v2 processes and every
//     process in the pods' cgroups;
//   - the mounts below that directory (rootfs bind mounts, /dev/shm tmpfs)
//     and the pods' network namespaces bind-mounted by containerd under
//     /run/netns/cni-*;
//   - the pods' cgroups (/kubepods/besteffort/pod<UID>/... in every cgroup
//     hierarchy) and the kubepods parents when they end up empty;
//   - the host bridge eaddrcri<hex> of the CNI network.
//
// # Network
//
// containerd 1.6 refuses a pod whose CNI result has no IP address on eth0
// ("failed to find network info for sandbox"), so a loopback-only CNI
// configuration is not usable. Each Runtime therefore uses the bridge plugin
// with host-local IPAM on a private /24 of 10.213.0.0/16, with isGateway,
// isDefaultGateway and ipMasq all false: the bridge gets no address, the pod
// gets no default route, no iptables rule is added and ip_forward is not
// touched. A pod can only reach its own addresses (127.0.0.1 included) and
// other pods of the same Runtime; nothing outside. The bridge is deleted at
// cleanup.
//
// # Cgroups
//
// Pods use the cgroupfs driver (runc option SystemdCgroup = false) with a
// kubelet-like cgroup parent "/kubepods/besteffort/pod<UID>"; containerd
// puts every container, the sandbox included, into
// "<parent>/<container ID>". On a hybrid host runc 1.1 creates that path in
// every v1 hierarchy (name=systemd included) and in the unified one, so the
// "0::" line of /proc/PID/cgroup of a container process reads
// "0::/kubepods/besteffort/pod<UID>/<container ID>" — what a kubelet with
// cgroupDriver=cgroupfs produces.
//
// containerd and the shims stay in the cgroups of the test process.
package critest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eaddr/eaddr/internal/testing/child"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// CNIBinDir is where the CNI plugins of Debian's containernetworking-plugins
// live.
const CNIBinDir = "/usr/lib/cni"

// k8sNamespace is the containerd namespace used by the CRI plugin.
const k8sNamespace = "k8s.io"

// Timeouts.
const (
	startTimeout = 30 * time.Second // containerd up and CRI ready
	callTimeout  = 30 * time.Second // one CRI call
	stopTimeout  = 10 * time.Second // containerd to exit after SIGTERM
	sweepTimeout = 15 * time.Second // leftover processes to disappear
)

// hostPath is the PATH given to containerd (which finds the shim and runc
// through it), independent of the test's environment.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Runtime is a private containerd (own root, state dir, socket, config)
// started for a test by Start, with CRI clients connected to it.
type Runtime struct {
	Socket string // unix socket path of its CRI endpoint (containerd's gRPC address)

	Dir        string // private base directory holding everything below
	Root       string // containerd root (persistent data: content, snapshots)
	State      string // containerd state (bundles, sockets, runc root)
	ConfigPath string // generated config.toml
	LogPath    string // containerd's stdout and stderr
	CNIConfDir string // CNI conf dir holding the single bridge network
	Bridge     string // host bridge created by the CNI bridge plugin
	Subnet     string // pod subnet (host-local IPAM)

	// StartDuration is how long Start took (containerd up, CRI ready,
	// image imported).
	StartDuration time.Duration

	RuntimeService runtimeapi.RuntimeServiceClient
	ImageService   runtimeapi.ImageServiceClient

	conn *grpc.ClientConn
	proc *child.Process // containerd

	createdDirs []string // hostDirs missing at Start, removed at cleanup if empty

	mu   sync.Mutex
	pods []*Pod // every pod RunPod tried to create, for cleanup
}

// requiredBinaries are looked up in hostPath before anything is started,
// each with the Debian package that installs it.
var requiredBinaries = [][2]string{{"containerd", "containerd"}, {"ctr", "containerd"},
	{"containerd-shim-runc-v2", "containerd"}, {"runc", "runc"}}

// requiredFiles must exist (CNI plugins and busybox), with their packages.
var requiredFiles = [][2]string{
	{BusyboxPath, "busybox-static"},
	{filepath.Join(CNIBinDir, "bridge"), "containernetworking-plugins"},
	{filepath.Join(CNIBinDir, "host-local"), "containernetworking-plugins"},
	{filepath.Join(CNIBinDir, "loopback"), "containernetworking-plugins"},
}

// checkPrerequisites skips (or fails under EADDR_REQUIRE_BPF=1) when a
// needed binary is missing.
func checkPrerequisites(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	var missing []string
	for _, b := range requiredBinaries {
		if _, err := lookPath(b[0]); err != nil {
			missing = append(missing, testenv.NotInstalled(b[0], b[1]))
		}
	}
	for _, f := range requiredFiles {
		if _, err := os.Stat(f[0]); err != nil {
			missing = append(missing, testenv.NotInstalled(f[0], f[1]))
		}
	}
	if len(missing) > 0 {
		testenv.Skip(t, "critest: "+strings.Join(missing, "; "))
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		testenv.Skip(t, "critest: /sys/fs/cgroup missing")
	}
}

// lookPath finds a binary in hostPath.
func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(hostPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, hostPath)
}

// Start launches containerd with a generated config.toml in private
// directories (root, state, gRPC socket, its own CNI conf dir, CNI plugins
// from /usr/lib/cni), waits for the CRI endpoint to answer Version and to
// report RuntimeReady and NetworkReady, and imports Image into the k8s.io
// namespace.
//
// It registers a t.Cleanup that — even when the test failed — stops and
// removes every pod, stops containerd, kills any shim, runc or container
// process it started, unmounts what it mounted (checked in
// /proc/self/mountinfo), removes the pods' cgroups, network namespaces and
// the CNI bridge, and removes its directories. On failure the tail of
// containerd's log and of the container logs is printed with t.Log.
//
// Missing binaries or not being root → testenv.Skip (a failure under
// EADDR_REQUIRE_BPF=1).
func Start(t testing.TB) *Runtime {
	t.Helper()
	checkPrerequisites(t)
	begin := time.Now()

	// Short base path: the socket path must fit in sun_path (108 bytes),
	// which the long t.TempDir() names do not guarantee.
	dir, err := os.MkdirTemp("", "eaddr-cri-")
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	suffix, err := randomHex(3)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("critest: %v", err)
	}
	third := int(suffix[0]) // bridge/subnet selector, random per Runtime
	r := &Runtime{
		Dir:         dir,
		Root:        filepath.Join(dir, "root"),
		State:       filepath.Join(dir, "state"),
		Socket:      filepath.Join(dir, "containerd.sock"),
		ConfigPath:  filepath.Join(dir, "config.toml"),
		LogPath:     filepath.Join(dir, "containerd.log"),
		CNIConfDir:  filepath.Join(dir, "cni", "net.d"),
		Bridge:      "eaddrcri" + fmt.Sprintf("%x", suffix),
		Subnet:      fmt.Sprintf("10.213.%d.0/24", third),
		createdDirs: Missing(hostDirs),
	}
	t.Cleanup(func() { r.cleanup(t) })

	for _, d := range []string{r.Root, r.State, r.CNIConfDir, filepath.Join(dir, "pods")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("critest: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.CNIConfDir, "10-eaddr-critest.conflist"), []byte(r.cniConfig()), 0o644); err != nil {
		t.Fatalf("critest: %v", err)
	}
	if err := os.WriteFile(r.ConfigPath, []byte(r.containerdConfig()), 0o600); err != nil {
		t.Fatalf("critest: %v", err)
	}
	imageTar := filepath.Join(dir, "image.tar")
	if _, err := buildImage(imageTar); err != nil {
		t.Fatalf("critest: building image: %v", err)
	}

	if err := r.startContainerd(); err != nil {
		t.Fatalf("critest: starting containerd: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+r.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	r.conn = conn
	r.RuntimeService = runtimeapi.NewRuntimeServiceClient(conn)
	r.ImageService = runtimeapi.NewImageServiceClient(conn)
	if err := r.waitReady(); err != nil {
		t.Fatalf("critest: %v", err)
	}
	if err := r.importImage(imageTar); err != nil {
		t.Fatalf("critest: %v", err)
	}
	r.StartDuration = time.Since(begin)
	t.Logf("critest: containerd ready at %s in %v (bridge %s, subnet %s)", r.Socket, r.StartDuration.Round(time.Millisecond), r.Bridge, r.Subnet)
	return r
}

// cniConfig is the single CNI network: see the package documentation.
func (r *Runtime) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "eaddr-critest",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "dataDir": %q
      }
    }
  ]
}
`, r.Bridge, r.Subnet, filepath.Join(r.Dir, "cni", "ipam"))
}

// containerdConfig is the generated config.toml (version 2).
func (r *Runtime) containerdConfig() string {
	return ContainerdConfig(r.Root, r.State, r.Socket, r.CNIConfDir)
}

// ContainerdConfig is the config of a private containerd whose files are
// all under root and state, serving CRI on socket with the bridge CNI of
// cniConfDir (critest's runtime and internal/testing/kubecluster's node).
func ContainerdConfig(root, state, socket, cniConfDir string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0

# Plugins that are not needed, or that would touch paths outside root/state
# (opt installs into /opt/containerd) or need kernel features we do not use.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.overlayfs",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = %q

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    discard_unpacked_layers = false

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "runc"
        Root = %q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
    conf_template = ""
`, root, state, socket, Image, filepath.Join(state, "runc"), CNIBinDir, cniConfDir)
}

// startContainerd starts containerd through child.Start: in its own
// process group, SIGKILLed if the test binary dies, and never earlier.
func (r *Runtime) startContainerd() error {
	bin, err := lookPath("containerd")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--config", r.ConfigPath)
	cmd.Dir = r.Dir
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root", "TMPDIR=" + r.Dir}
	r.proc, err = child.Start("containerd", r.LogPath, cmd)
	return err
}

// alive reports whether containerd is still running.
func (r *Runtime) alive() bool { return r.proc != nil && !r.proc.Exited() }

// waitReady polls the CRI endpoint until Version answers and Status reports
// RuntimeReady and NetworkReady (the CRI plugin loads the CNI config
// asynchronously).
func (r *Runtime) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		if !r.alive() {
			return fmt.Errorf("containerd exited during start-up (%v)", r.proc.Cmd.ProcessState)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = r.ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("CRI endpoint %s not ready after %v: %v", r.Socket, startTimeout, last)
}

func (r *Runtime) ready(ctx context.Context) error {
	if _, err := r.RuntimeService.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		return err
	}
	st, err := r.RuntimeService.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return err
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			return fmt.Errorf("condition %s false: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	return nil
}

// importImage imports the OCI archive with ctr (unpacked for the native
// snapshotter) and waits until the CRI image service sees Image.
func (r *Runtime) importImage(tarPath string) error {
	ctr, err := lookPath("ctr")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctr, "--address", r.Socket, "--namespace", k8sNamespace,
		"images", "import", "--snapshotter", "native", tarPath)
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root", "TMPDIR=" + r.Dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import: %v\n%s", err, out)
	}
	for ctx.Err() == nil {
		st, err := r.ImageService.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: Image}})
		if err == nil && st.GetImage() != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("image %s imported but not visible through CRI", Image)
}

// ctx returns a context for one CRI call.
func ctx() (context.Context, context.CancelFunc) { return ctxTimeout(callTimeout) }

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errs joins non-nil errors.
func errs(list []error) error { return errors.Join(list...) }
