package critest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// This file runs node agents: a container from an imported image in a pod
// that shares the node's network and PID namespaces, privileged or with
// chosen capabilities, with host paths mounted — what a DaemonSet with
// hostNetwork, hostPID and hostPath volumes gets from a kubelet.

// Mount is a host path mounted into a container (a CRI Mount: a recursive
// bind mount with private propagation). ReadOnly remounts the top of the
// bind read-only; as with a Kubernetes hostPath volume, mounts below
// HostPath stay writable (runc 1.1 has no recursive read-only).
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// HostSecurity is the security context of the container RunHost starts
// (and of its sandbox).
type HostSecurity struct {
	// Privileged: every capability, every device, sysfs and cgroupfs
	// mounted read-write, no masked or read-only /proc paths (the
	// securityContext.privileged of a pod). The sandbox is privileged too,
	// as containerd refuses a privileged container in an unprivileged
	// sandbox.
	Privileged bool
	// Without Privileged: capabilities dropped from and then added to the
	// runtime's default set, with or without the "CAP_" prefix; "ALL" in
	// Drop drops every one (securityContext.capabilities of a pod).
	Drop, Add []string
}

// hostNamespaces: the node's network and PID namespaces (hostNetwork,
// hostPID), a pod IPC namespace.
func hostNamespaces() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_NODE,
		Pid:     runtimeapi.NamespaceMode_NODE,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
}

// ImportArchive imports the OCI image archive at path (e.g. from buildah
// commit oci-archive:...) into the k8s.io namespace, unpacked for the
// native snapshotter, and returns once CRI sees it as ref. ref must be a
// fully qualified reference ("localhost/eaddr:test"): CRI would read a short
// one as docker.io/library/.... The archive's single manifest is named ref
// whatever name the archive gives it: ctr names it <repository of
// ref>@<digest> (--base-name, --digests), then tags that ref. The image is
// removed with the Runtime's root at cleanup.
func (r *Runtime) ImportArchive(t testing.TB, path, ref string) {
	t.Helper()
	begin := time.Now()
	digest, err := archiveManifest(path)
	if err != nil {
		t.Fatalf("critest: %s: %v", path, err)
	}
	repo := repository(ref)
	c, cancel := context.WithTimeout(context.Background(), 2*callTimeout)
	defer cancel()
	r.ctr(t, c, "images", "import", "--snapshotter", "native", "--base-name", repo, "--digests", path)
	r.ctr(t, c, "images", "tag", "--force", repo+"@"+digest, ref)
	for {
		st, err := r.ImageService.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err == nil && st.GetImage() != nil {
			t.Logf("critest: imported %s as %s (manifest %s, %d bytes) in %v", filepath.Base(path), ref,
				digest, st.GetImage().GetSize(), time.Since(begin).Round(time.Millisecond))
			return
		}
		if c.Err() != nil {
			t.Fatalf("critest: %s imported from %s but not visible through CRI: %v", ref, path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ctr runs ctr against this Runtime's containerd in the k8s.io namespace.
func (r *Runtime) ctr(t testing.TB, c context.Context, args ...string) {
	t.Helper()
	bin, err := lookPath("ctr")
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	cmd := exec.CommandContext(c, bin, append([]string{"--address", r.Socket, "--namespace", k8sNamespace}, args...)...)
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root", "TMPDIR=" + r.Dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("critest: ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// repository returns ref without its tag or digest.
func repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

// archiveManifest returns the digest of the one manifest listed in the
// index.json of the OCI archive (tar) at path.
func archiveManifest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("no index.json in the archive: %w", err)
		}
		if strings.TrimPrefix(h.Name, "./") != "index.json" {
			continue
		}
		var index struct {
			Manifests []descriptor `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("index.json: %w", err)
		}
		if len(index.Manifests) != 1 || index.Manifests[0].MediaType != mediaTypeManifest {
			return "", fmt.Errorf("index.json lists %d manifests (%+v), want one image manifest", len(index.Manifests), index.Manifests)
		}
		return index.Manifests[0].Digest, nil
	}
}

// RunPrivileged runs image as a node agent: a pod sandbox in the node's
// network and PID namespaces (NamespaceMode NODE) and in it a privileged
// container with the host paths mounts and argv (the Kubernetes "command";
// none: the image's ENTRYPOINT and CMD). Its stdout and stderr go to its
// CRI log file (read them with Logs). It returns once the container runs;
// cleanup removes the pod and container even when the test fails, like
// every pod of the Runtime.
func (r *Runtime) RunPrivileged(t testing.TB, image string, mounts []Mount, argv ...string) *Container {
	t.Helper()
	return r.RunHost(t, image, HostSecurity{Privileged: true}, mounts, argv...)
}

// RunHost is RunPrivileged with the security context sec: privileged, or
// the runtime's default capabilities minus sec.Drop plus sec.Add. An
// unprivileged container also gets the runtime's masked and read-only
// /proc paths and a read-only /sys; seccomp and AppArmor are off in this
// Runtime (a pod's default without SeccompDefault).
//
// If the container does not reach running, the test fails with its log.
// Use StartHost for a container that may exit at once.
func (r *Runtime) RunHost(t testing.TB, image string, sec HostSecurity, mounts []Mount, argv ...string) *Container {
	t.Helper()
	ctr, err := r.StartHost(t, image, sec, mounts, argv...)
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	return ctr
}

// StartHost is RunHost returning an error, instead of failing the test,
// when the container is created but does not stay running (exits at
// once, e.g. for want of a capability); ctr is then non-nil and Logs
// gives what it wrote. CRI and setup errors still fail the test.
func (r *Runtime) StartHost(t testing.TB, image string, sec HostSecurity, mounts []Mount, argv ...string) (*Container, error) {
	t.Helper()
	uid, err := newUUID()
	if err != nil {
		t.Fatalf("critest: %v", err)
	}
	name := "eaddr-" + uid[:8] // a DaemonSet pod's name: <daemonset>-<suffix>
	const namespace = "kube-system"
	p := r.newPod(t, name, namespace, uid)
	labels := map[string]string{
		LabelPodName:      name,
		LabelPodNamespace: namespace,
		LabelPodUID:       uid,
		"app":             "eaddr",
	}
	p.config = &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		LogDirectory: p.logDir,
		Labels:       labels,
		Annotations:  map[string]string{"kubernetes.io/config.source": "eaddr-critest"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: p.CgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: hostNamespaces(),
				Privileged:       sec.Privileged,
			},
		},
	}
	// A host-network pod has no hostname of its own (the kubelet leaves it
	// empty: the node's).

	info := r.runSandbox(t, p)
	p.PausePID = info.Pid
	return r.createAndStart(t, p, hostContainer(p, image, sec, mounts, argv))
}

// hostContainer is the config of StartHost's container, eaddr, in pod p:
// host namespaces, sec's privilege or capabilities, mounts, and NODE_NAME
// as the DaemonSet sets it.
func hostContainer(p *Pod, image string, sec HostSecurity, mounts []Mount, argv []string) *runtimeapi.ContainerConfig {
	const cname = "eaddr"
	var criMounts []*runtimeapi.Mount
	for _, m := range mounts {
		criMounts = append(criMounts, &runtimeapi.Mount{
			ContainerPath: m.ContainerPath,
			HostPath:      m.HostPath,
			Readonly:      m.ReadOnly,
			Propagation:   runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		})
	}
	secCtx := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: hostNamespaces(),
		Privileged:       sec.Privileged,
	}
	if !sec.Privileged && (len(sec.Add) > 0 || len(sec.Drop) > 0) {
		secCtx.Capabilities = &runtimeapi.Capability{AddCapabilities: criCaps(sec.Add), DropCapabilities: criCaps(sec.Drop)}
	}
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: cname},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  argv,
		Labels:   containerLabels(p, cname),
		Envs:     []*runtimeapi.KeyValue{{Key: "NODE_NAME", Value: []byte(nodeName())}},
		Mounts:   criMounts,
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: secCtx},
	}
}

// criCaps returns capability names as CRI wants them, without the "CAP_"
// prefix: containerd 1.6 prepends "CAP_" to each name, and runc silently
// ignores the "CAP_CAP_BPF" that a prefixed name becomes (so does a
// Kubernetes manifest that writes CAP_BPF instead of BPF).
func criCaps(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, strings.TrimPrefix(strings.ToUpper(n), "CAP_"))
	}
	return out
}

// nodeName is what a DaemonSet passes as $NODE_NAME (spec.nodeName): here
// the hostname.
func nodeName() string {
	h, _ := os.Hostname()
	return h
}

// Exited reports whether container c is no longer running, with its exit
// code.
func (r *Runtime) Exited(t testing.TB, c *Container) (exited bool, code int) {
	t.Helper()
	cc, cancel := ctx()
	defer cancel()
	st, err := r.RuntimeService.ContainerStatus(cc, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID})
	if err != nil {
		t.Fatalf("critest: ContainerStatus %s: %v", c.ID, err)
	}
	s := st.GetStatus()
	return s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED, int(s.GetExitCode())
}

// Stop stops container c as a kubelet deleting its pod does (CRI
// StopContainer: SIGTERM, then SIGKILL after grace) and returns its exit
// code.
func (r *Runtime) Stop(t testing.TB, c *Container, grace time.Duration) int {
	t.Helper()
	cc, cancel := ctxTimeout(grace + callTimeout)
	defer cancel()
	if _, err := r.RuntimeService.StopContainer(cc, &runtimeapi.StopContainerRequest{ContainerId: c.ID, Timeout: int64(grace.Seconds())}); err != nil {
		t.Fatalf("critest: StopContainer %s: %v", c.ID, err)
	}
	_, code := r.Exited(t, c)
	return code
}

// Logs returns what container c wrote to stdout and stderr so far, from
// its CRI log file, as lines in the order they were completed: the
// "TIMESTAMP STREAM TAG " prefix of each record is removed and partial
// records (tag P) are joined with the record that ends their line (tag F).
// A line still partial at the end is included.
func (r *Runtime) Logs(t testing.TB, c *Container) string {
	t.Helper()
	return r.LogStream(t, c, "")
}

// LogStream is Logs restricted to one stream, "stdout" or "stderr" ("" for
// both).
func (r *Runtime) LogStream(t testing.TB, c *Container, stream string) string {
	t.Helper()
	b, err := os.ReadFile(c.logPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("critest: container log: %v", err)
	}
	return parseCRILog(b, stream)
}

// parseCRILog decodes the CRI log format (one record per line:
// "<RFC 3339 nano time> <stdout|stderr> <tags> <content>", tags ':'
// separated, the first P for a partial line or F for a full one), keeping
// stream (all if empty).
func parseCRILog(b []byte, stream string) string {
	var out strings.Builder
	partial := map[string]*strings.Builder{}
	var order []string // streams with a pending partial line, in order
	for rec := range bytes.SplitSeq(b, []byte("\n")) {
		if len(rec) == 0 {
			continue
		}
		f := bytes.SplitN(rec, []byte(" "), 4)
		if len(f) < 3 {
			continue
		}
		s, tag := string(f[1]), string(f[2])
		content := []byte(nil)
		if len(f) == 4 {
			content = f[3]
		}
		if stream != "" && s != stream {
			continue
		}
		pb := partial[s]
		if strings.HasPrefix(tag, "P") {
			if pb == nil {
				pb = &strings.Builder{}
				partial[s] = pb
				order = append(order, s)
			}
			pb.Write(content)
			continue
		}
		if pb != nil {
			out.WriteString(pb.String())
			delete(partial, s)
		}
		out.Write(content)
		out.WriteByte('\n')
	}
	for _, s := range order {
		if pb := partial[s]; pb != nil {
			out.WriteString(pb.String())
			out.WriteByte('\n')
			delete(partial, s)
		}
	}
	return out.String()
}

// WaitLog waits up to timeout for a line of container c's log containing
// substr and returns the log. It gives up early when the container exits.
// ok is false when the line did not come.
func (r *Runtime) WaitLog(t testing.TB, c *Container, substr string, timeout time.Duration) (log string, ok bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		log = r.Logs(t, c)
		for line := range strings.SplitSeq(log, "\n") {
			if strings.Contains(line, substr) {
				return log, true
			}
		}
		if exited, _ := r.Exited(t, c); exited || time.Now().After(deadline) {
			return r.Logs(t, c), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
