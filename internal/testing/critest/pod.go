package critest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet puts on every sandbox and container; RunPod and
// StartContainer set them the same way, so code that reads them from CRI (or
// from containerd's metadata) sees what it would on a real node.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Pod is a pod sandbox started by RunPod.
type Pod struct {
	ID        string // sandbox ID (64 hex digits); also the sandbox ("pause") container's ID
	UID       string // metadata.uid, a random UUID
	Name      string // metadata.name
	Namespace string // metadata.namespace

	// NetNSPath is the pod's network namespace as bind-mounted by containerd
	// (/var/run/netns/cni-<uuid>), from the sandbox's verbose status.
	NetNSPath string
	// PausePID is the host PID of the sandbox process (`sleep 1000000` from
	// Image).
	PausePID int
	// CgroupParent is the cgroup parent given to CRI,
	// "/kubepods/besteffort/pod<UID>"; every container of the pod, the
	// sandbox included, lives in CgroupParent + "/" + its container ID.
	CgroupParent string
	// IP is the pod's address on eth0 (from the bridge network).
	IP string

	config *runtimeapi.PodSandboxConfig
	logDir string
}

// Container is a container started by StartContainer.
type Container struct {
	ID   string // container ID (64 hex digits)
	Name string // metadata.name
	PID  int    // host PID of its init process
	Pod  *Pod   // the pod it runs in

	logPath string
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

func randomHex(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := rand.Read(b)
	return b, err
}

// podNamespaces are the namespace options of every sandbox and container:
// network and IPC shared by the pod (NamespaceMode POD, not NODE), one PID
// namespace per container — the Kubernetes defaults.
func podNamespaces() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// sandboxInfo is the part of containerd's verbose PodSandboxStatus /
// ContainerStatus "info" JSON that we use.
type sandboxInfo struct {
	Pid         int `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			CgroupsPath string `json:"cgroupsPath"`
			Namespaces  []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

func parseInfo(info map[string]string) (sandboxInfo, error) {
	var si sandboxInfo
	raw, ok := info["info"]
	if !ok {
		return si, fmt.Errorf("no \"info\" in verbose status (keys %v)", slices.Sorted(maps.Keys(info)))
	}
	err := json.Unmarshal([]byte(raw), &si)
	return si, err
}

// RunPod runs a pod sandbox through CRI RunPodSandbox, as a kubelet would,
// and returns it once it is ready.
//
// The sandbox has metadata {name, namespace, uid: random UUID}; the given
// labels plus the kubelet's io.kubernetes.pod.{name,namespace,uid}; hostname
// name; the Linux sysctls given (applied in the pod's own network namespace,
// e.g. {"net.ipv4.ip_local_port_range": "40000 40001"}); a pod network
// namespace (NamespaceMode POD, not the host's) attached to the Runtime's
// bridge network; and cgroup parent "/kubepods/besteffort/pod<uid>" (cgroupfs
// driver). NetNSPath and PausePID come from the verbose sandbox status.
func (r *Runtime) RunPod(t testing.TB, name, namespace string, labels map[string]string, sysctls map[string]string) *Pod {
	t.Helper()
	uid, err := newUUID()
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	return r.RunPodUID(t, uid, name, namespace, labels, sysctls)
}

// RunPodUID is RunPod with the pod's UID given: that of a Pod object an API
// server made, as a kubelet runs it.
func (r *Runtime) RunPodUID(t testing.TB, uid, name, namespace string, labels map[string]string, sysctls map[string]string) *Pod {
	t.Helper()
	p := r.newPod(t, name, namespace, uid)
	allLabels := map[string]string{}
	maps.Copy(allLabels, labels)
	allLabels[LabelPodName] = name
	allLabels[LabelPodNamespace] = namespace
	allLabels[LabelPodUID] = uid
	p.config = &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Hostname:     name,
		LogDirectory: p.logDir,
		Labels:       allLabels,
		Annotations:  map[string]string{"kubernetes.io/config.source": "eaddr-critest"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: p.CgroupParent,
			Sysctls:      sysctls,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: podNamespaces(),
			},
		},
	}

	info := r.runSandbox(t, p)
	p.PausePID = info.Pid
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			p.NetNSPath = ns.Path
		}
	}
	if p.PausePID <= 0 {
		t.Fatalf("critest: pod %s: no sandbox pid in verbose status", p.ID)
	}
	return p
}

// StartContainer creates and starts a container named name in pod p running
// argv (CRI CreateContainer + StartContainer; argv is the Kubernetes
// "command", replacing Image's entrypoint), with the kubelet's
// io.kubernetes.* labels, and returns it once it is running. PID comes from
// the verbose ContainerStatus.
func (r *Runtime) StartContainer(t testing.TB, p *Pod, name string, argv ...string) *Container {
	t.Helper()
	if len(argv) == 0 {
		t.Fatalf("critest: StartContainer %s: empty argv", name)
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: Image},
		Command:  argv,
		Labels:   containerLabels(p, name),
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: podNamespaces(),
			},
		},
	}
	ctr, err := r.createAndStart(t, p, cfg)
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	return ctr
}

// containerLabels are the kubelet's io.kubernetes.* labels of container name
// in pod p.
func containerLabels(p *Pod, name string) map[string]string {
	return map[string]string{
		LabelContainerName: name,
		LabelPodName:       p.Name,
		LabelPodNamespace:  p.Namespace,
		LabelPodUID:        p.UID,
	}
}

// createAndStart creates the container cfg in pod p (its log where the
// kubelet puts it: <name>/<restartCount>.log), starts it, and returns it
// with its PID from the verbose ContainerStatus. An error, with what the
// container logged, when it does not start or does not stay running (ctr
// is then non-nil); other CRI errors fail the test.
func (r *Runtime) createAndStart(t testing.TB, p *Pod, cfg *runtimeapi.ContainerConfig) (*Container, error) {
	t.Helper()
	name := cfg.Metadata.Name
	ctr := &Container{Name: name, Pod: p}
	cfg.LogPath = filepath.Join(name, "0.log")
	ctr.logPath = filepath.Join(p.logDir, cfg.LogPath)
	if err := os.MkdirAll(filepath.Dir(ctr.logPath), 0o755); err != nil {
		t.Fatalf("critest: %v", err)
	}
	c, cancel := ctx()
	defer cancel()
	resp, err := r.RuntimeService.CreateContainer(c, &runtimeapi.CreateContainerRequest{
		PodSandboxId: p.ID, Config: cfg, SandboxConfig: p.config,
	})
	if err != nil {
		t.Fatalf("critest: CreateContainer %s (%s) in %s/%s: %v", name, cfg.Image.Image, p.Namespace, p.Name, err)
	}
	ctr.ID = resp.ContainerId
	if _, err := r.RuntimeService.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: ctr.ID}); err != nil {
		return ctr, fmt.Errorf("StartContainer %s (%s): %v\nlog:\n%s", name, ctr.ID, err, tail(ctr.logPath, 20))
	}
	st, err := r.RuntimeService.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ID, Verbose: true})
	if err != nil {
		t.Fatalf("critest: ContainerStatus %s: %v", ctr.ID, err)
	}
	if s := st.GetStatus().GetState(); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return ctr, fmt.Errorf("container %s (%s) is %v (exit code %d, %s), not running\nlog:\n%s",
			name, ctr.ID, s, st.GetStatus().GetExitCode(), st.GetStatus().GetReason(), tail(ctr.logPath, 20))
	}
	info, err := parseInfo(st.GetInfo())
	if err != nil {
		t.Fatalf("critest: container %s: verbose status: %v", ctr.ID, err)
	}
	if info.Pid <= 0 {
		t.Fatalf("critest: container %s: no pid in verbose status", ctr.ID)
	}
	ctr.PID = info.Pid
	return ctr, nil
}

// Exec runs argv in container c synchronously (CRI ExecSync) and returns its
// stdout followed by its stderr, and its exit code. timeout bounds the
// command (rounded up to whole seconds, as CRI wants); a timeout or any CRI
// error fails the test.
func (r *Runtime) Exec(t testing.TB, c *Container, timeout time.Duration, argv ...string) (out string, code int) {
	t.Helper()
	secs := int64(math.Ceil(timeout.Seconds()))
	if secs < 1 {
		secs = 1
	}
	cc, cancel := ctxTimeout(time.Duration(secs)*time.Second + callTimeout)
	defer cancel()
	resp, err := r.RuntimeService.ExecSync(cc, &runtimeapi.ExecSyncRequest{ContainerId: c.ID, Cmd: argv, Timeout: secs})
	if err != nil {
		t.Fatalf("critest: ExecSync %q in %s: %v", argv, c.Name, err)
	}
	return string(resp.Stdout) + string(resp.Stderr), int(resp.ExitCode)
}

// newPod registers a pod before its sandbox exists, so that cleanup also
// looks for the cgroups of a pod whose creation failed half-way, and makes
// its log directory.
func (r *Runtime) newPod(t testing.TB, name, namespace, uid string) *Pod {
	t.Helper()
	p := &Pod{
		UID:          uid,
		Name:         name,
		Namespace:    namespace,
		CgroupParent: "/kubepods/besteffort/pod" + uid,
		logDir:       filepath.Join(r.Dir, "pods", namespace+"_"+name+"_"+uid),
	}
	r.mu.Lock()
	r.pods = append(r.pods, p)
	r.mu.Unlock()
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		t.Fatalf("critest: %v", err)
	}
	return p
}

// runSandbox runs p.config through CRI, waits until it is ready, and fills
// p.ID and p.IP from its status; it returns the verbose status info.
func (r *Runtime) runSandbox(t testing.TB, p *Pod) sandboxInfo {
	t.Helper()
	c, cancel := ctx()
	defer cancel()
	resp, err := r.RuntimeService.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: p.config})
	if err != nil {
		t.Fatalf("critest: RunPodSandbox %s/%s: %v", p.Namespace, p.Name, err)
	}
	p.ID = resp.PodSandboxId
	st, err := r.RuntimeService.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.ID, Verbose: true})
	if err != nil {
		t.Fatalf("critest: PodSandboxStatus %s: %v", p.ID, err)
	}
	if s := st.GetStatus().GetState(); s != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("critest: pod %s/%s (%s) is %v, not ready", p.Namespace, p.Name, p.ID, s)
	}
	p.IP = st.GetStatus().GetNetwork().GetIp()
	info, err := parseInfo(st.GetInfo())
	if err != nil {
		t.Fatalf("critest: pod %s: verbose status: %v", p.ID, err)
	}
	return info
}
