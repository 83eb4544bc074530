// Package apiserver tests the Kubernetes manifests of deploy/: its tests decode every
// document of every shipped manifest (deploy/*.yaml, deploy/base/*.yaml, and what kubectl
// kustomize builds of every kustomization) strictly into the k8s.io/api types and check the
// choices that docs/kubernetes.md explains (least privilege, read-only host paths,
// probes, resources, flags eaddr really has), render them with kubectl kustomize and helm,
// and apply them to a real kube-apiserver. They run in deploy/ (deploytest.Main).
package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The kinds deploy/ may hold, each decoded into its k8s.io/api type. Anything else
// (an unknown kind, a typo in apiVersion, a Role eaddr has no use for) fails.
var allowedKinds = map[schema.GroupVersionKind]func() runtime.Object{
	corev1.SchemeGroupVersion.WithKind("Namespace"):      func() runtime.Object { return &corev1.Namespace{} },
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"): func() runtime.Object { return &corev1.ServiceAccount{} },
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):      func() runtime.Object { return &appsv1.DaemonSet{} },
	// The Prometheus Operator's type, mirrored by hand in alerts_test.go (its Go
	// module is not a dependency of eaddr).
	monitoringV1.WithKind("PrometheusRule"): func() runtime.Object { return &prometheusRule{} },
}

// manifestDirs hold the shipped manifests, as *.yaml: deploy/ itself (the alert
// rules) and deploy/base (the DaemonSet, kubectl apply -k deploy/base). The
// overlay deploy/kube-events is checked as kustomize builds it
// (TestKubeEventsOverlay, TestKustomize).
var manifestDirs = []string{".", "base"}

// notManifests are files in manifestDirs that hold no Kubernetes object, and
// what checks them instead.
var notManifests = map[string]string{
	"prometheus-rules.yaml":   "a plain Prometheus rule file: TestPrometheusRules, TestPrometheusRuleFilesInStep",
	"base/kustomization.yaml": "kustomize's list of the default manifests (kubectl apply -k deploy/base): TestKustomize",
}

// manifestFiles are the *.yaml and *.yml of manifestDirs, less notManifests.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range manifestDirs {
		for _, pattern := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(dir, pattern))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
	}
	files = slices.DeleteFunc(files, func(f string) bool { return notManifests[f] != "" })
	if len(files) == 0 {
		t.Fatalf("no *.yaml in %q", manifestDirs)
	}
	return files
}

// strictDecoder is apimachinery's YAML serializer in strict mode: the decoding the
// API server's strict field validation does. Field names are matched
// case-sensitively (sigs.k8s.io/json), so "hostPid" is an unknown field, not
// hostPID; duplicate keys and unknown fields are errors. (sigs.k8s.io/yaml's
// UnmarshalStrict and encoding/json's DisallowUnknownFields both match field names
// case-insensitively and would accept "hostPid".)
var strictDecoder = func() *kjson.Serializer {
	s := runtime.NewScheme()
	for gvk, newObj := range allowedKinds {
		s.AddKnownTypeWithName(gvk, newObj())
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
}()

// object is one decoded document.
type object struct {
	where string // file:document
	gvk   schema.GroupVersionKind
	obj   runtime.Object
	raw   []byte // the document as written
}

// decodeStream splits a YAML stream into documents and decodes each strictly into
// its typed object. Documents holding only comments or whitespace are skipped.
func decodeStream(name string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		where := fmt.Sprintf("%s: document %d", name, i)
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return out, fmt.Errorf("%s: %w", where, err)
		}
		if t := strings.TrimSpace(string(j)); t == "null" || t == "" {
			continue // comments only
		}
		gvk, err := kjson.DefaultMetaFactory.Interpret(j)
		if err != nil {
			return out, fmt.Errorf("%s: %w", where, err)
		}
		newObj, ok := allowedKinds[*gvk]
		if !ok {
			return out, fmt.Errorf("%s: kind %q of apiVersion %q is not expected in deploy/ (allowed: %v)", where, gvk.Kind, gvk.GroupVersion(), allowedList())
		}
		obj, _, err := strictDecoder.Decode(doc, nil, newObj())
		if err != nil {
			return out, fmt.Errorf("%s (%s): %w", where, gvk.Kind, err)
		}
		out = append(out, object{where: where, gvk: *gvk, obj: obj, raw: doc})
	}
}

func allowedList() []string {
	var l []string
	for gvk := range allowedKinds {
		l = append(l, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	slices.Sort(l)
	return l
}

// manifests decodes every manifest file (manifestFiles).
func manifests(t *testing.T) []object {
	t.Helper()
	var all []object
	for _, f := range manifestFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeStream(f, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no documents", f)
		}
		all = append(all, objs...)
	}
	return all
}

func find[T runtime.Object](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// daemonSetFile holds the DaemonSet, its Namespace and ServiceAccount.
const daemonSetFile = "base/daemonset.yaml"

// eaddrDaemonSet returns deploy/base/daemonset.yaml's DaemonSet.
func eaddrDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStream(daemonSetFile, data)
	if err != nil {
		t.Fatal(err)
	}
	ds := find[*appsv1.DaemonSet](objs)
	if len(ds) != 1 {
		t.Fatalf("%s: %d DaemonSets, want 1", daemonSetFile, len(ds))
	}
	return ds[0]
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := manifests(t)
	for _, o := range objs {
		t.Logf("%s: %s %s", o.where, o.gvk.Kind, o.obj.(interface{ GetName() string }).GetName())
	}
	namespaces := find[*corev1.Namespace](objs)
	accounts := find[*corev1.ServiceAccount](objs)
	sets := find[*appsv1.DaemonSet](objs)
	if len(namespaces) != 1 || len(accounts) != 1 || len(sets) != 1 {
		t.Fatalf("want one Namespace, one ServiceAccount and one DaemonSet, have %d, %d, %d", len(namespaces), len(accounts), len(sets))
	}
	ns, sa, ds := namespaces[0], accounts[0], sets[0]
	if ds.Namespace != ns.Name || sa.Namespace != ns.Name {
		t.Errorf("DaemonSet in %q and ServiceAccount in %q, want both in the Namespace %q", ds.Namespace, sa.Namespace, ns.Name)
	}
	// hostPID, hostPath and added capabilities are refused by the baseline and
	// restricted Pod Security levels.
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("Namespace %s: pod-security.kubernetes.io/enforce = %q, want privileged", ns.Name, got)
	}
	// eaddr never talks to the API server: no token.
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false", sa.Name)
	}
	if ds.Spec.Template.Spec.ServiceAccountName != sa.Name {
		t.Errorf("DaemonSet uses ServiceAccount %q, want %q", ds.Spec.Template.Spec.ServiceAccountName, sa.Name)
	}
	for _, p := range checkDaemonSet(ds) {
		t.Error(p)
	}
}

// The capabilities the container adds (docs/kubernetes.md says why, in a
// table; TestCapabilitiesAreDocumented keeps the three in step).
var wantCaps = []string{"BPF", "DAC_READ_SEARCH", "PERFMON", "SYS_ADMIN", "SYS_PTRACE"}

// checkDaemonSet returns what is wrong with ds, one sentence each.
func checkDaemonSet(ds *appsv1.DaemonSet) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	spec := ds.Spec.Template.Spec

	if ds.Spec.Selector == nil || len(ds.Spec.Selector.MatchLabels) == 0 {
		bad("spec.selector.matchLabels is empty")
	} else {
		for k, v := range ds.Spec.Selector.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				bad("selector %s=%s does not match the template's labels", k, v)
			}
		}
	}
	if u := ds.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
		u.RollingUpdate.MaxUnavailable == nil || u.RollingUpdate.MaxUnavailable.String() != "1" {
		bad("updateStrategy must be RollingUpdate with maxUnavailable 1")
	}
	if !spec.HostPID {
		bad("hostPID must be true: eaddr reads /proc/PID of every process and pid 1's netns")
	}
	if spec.HostNetwork {
		bad("hostNetwork is not needed (docs/kubernetes.md): netns are reached through /proc/PID/ns/net")
	}
	if spec.HostIPC {
		bad("hostIPC is not needed")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		bad("pod automountServiceAccountToken must be false: eaddr does not use the Kubernetes API")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g > 30 {
		bad("terminationGracePeriodSeconds must be set and small (eaddr stops in well under a second)")
	}
	everywhere := false
	for _, tol := range spec.Tolerations {
		if tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == "" {
			everywhere = true
		}
	}
	if !everywhere {
		bad("tolerations must include {operator: Exists} so eaddr runs on every node")
	}
	if len(spec.InitContainers) != 0 || len(spec.Containers) != 1 {
		bad("want exactly one container and no init containers, have %d and %d", len(spec.Containers), len(spec.InitContainers))
		return p
	}
	c := spec.Containers[0]
	if c.Image == "" {
		bad("container %s has no image", c.Name)
	}

	// Security context.
	sc := c.SecurityContext
	if sc == nil {
		bad("container %s has no securityContext", c.Name)
		return p
	}
	if sc.Privileged != nil && *sc.Privileged {
		bad("privileged: true is only the commented alternative; the container gets capabilities")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		bad("allowPrivilegeEscalation: false contradicts SYS_ADMIN (documented as always escalating) and is rejected with privileged: true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		bad("runAsUser must be 0: the capabilities are root's")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		bad("readOnlyRootFilesystem must be true: eaddr writes no file")
	}
	if sc.Capabilities == nil {
		bad("no capabilities: want drop [ALL] and add %v", wantCaps)
	} else {
		if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			bad("capabilities.drop = %v, want [ALL]", sc.Capabilities.Drop)
		}
		var add []string
		for _, c := range sc.Capabilities.Add {
			if strings.HasPrefix(strings.ToUpper(string(c)), "CAP_") {
				bad("capability %q: write it without CAP_ (containerd prefixes it: CAP_CAP_... is ignored by runc)", c)
			}
			add = append(add, string(c))
		}
		slices.Sort(add)
		if !slices.Equal(add, wantCaps) {
			bad("capabilities.add = %v, want exactly %v", add, wantCaps)
		}
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("seccompProfile must be RuntimeDefault (it allows bpf, perf_event_open, setns and mount with these capabilities)")
	}
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		bad("appArmorProfile must be Unconfined: the runtime's default profile denies ptrace-read of host processes and mount")
	}

	// Host paths: each mounted read-only, at the same path as on the node.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	var hostMounts []string // mount paths of hostPath volumes
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		m, ok := mounts[v.Name]
		if !ok {
			bad("hostPath volume %s is not mounted", v.Name)
			continue
		}
		if !m.ReadOnly {
			bad("hostPath volume %s (%s) must be mounted readOnly", v.Name, v.HostPath.Path)
		}
		if m.MountPath != v.HostPath.Path {
			bad("hostPath %s is mounted at %s: mount it at the same path, where eaddr looks", v.HostPath.Path, m.MountPath)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			bad("hostPath volume %s: no subPath", v.Name)
		}
		if v.HostPath.Type == nil {
			bad("hostPath volume %s has no type", v.Name)
		}
		hostMounts = append(hostMounts, m.MountPath)
	}
	for _, path := range []string{"/sys/kernel/btf", "/sys/fs/cgroup", "/sys/kernel/tracing"} {
		found := false
		for _, v := range spec.Volumes {
			if v.HostPath != nil && v.HostPath.Path == path {
				found = true
			}
		}
		if !found {
			bad("no hostPath volume for %s", path)
		}
	}

	// Arguments.
	if len(c.Args) == 0 || c.Args[0] != "trace" {
		bad("args must start with the trace subcommand, have %v", c.Args)
	}
	// The CRI socket: the socket itself mounted (type Socket), or its directory.
	cri := flagValue(c.Args, "--cri-endpoint")
	if !slices.ContainsFunc(hostMounts, func(m string) bool { return cri != "" && (cri == m || strings.HasPrefix(cri, m+"/")) }) {
		bad("--cri-endpoint %q is not in a hostPath volume (mounted: %v)", cri, hostMounts)
	}

	// Environment.
	var node *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "NODE_NAME" {
			node = &c.Env[i]
		}
	}
	if node == nil || node.ValueFrom == nil || node.ValueFrom.FieldRef == nil || node.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		bad("env NODE_NAME must come from fieldRef spec.nodeName")
	}

	// Resources: both set, limits >= requests, GOMEMLIMIT below the memory limit.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			bad("resources: %s request and limit must both be set", r)
			continue
		}
		if lim.Cmp(req) < 0 {
			bad("resources: %s limit %s is below the request %s", r, lim.String(), req.String())
		}
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		soft, err := goMemLimit(e.Value)
		lim, ok := c.Resources.Limits[corev1.ResourceMemory]
		if err != nil || !ok || soft >= lim.Value() {
			bad("GOMEMLIMIT=%s must be a size below limits.memory", e.Value)
		}
	}

	// The metrics port, the probes and --metrics-addr agree.
	var metrics *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			metrics = &c.Ports[i]
		}
	}
	if metrics == nil {
		bad("no containerPort named metrics")
	} else {
		addr := flagValue(c.Args, "--metrics-addr")
		if !strings.HasSuffix(addr, fmt.Sprintf(":%d", metrics.ContainerPort)) {
			bad("--metrics-addr %q does not listen on the metrics port %d", addr, metrics.ContainerPort)
		}
	}
	for name, pr := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			bad("%s must be an httpGet on /healthz", name)
			continue
		}
		if pr.HTTPGet.Path != "/healthz" {
			bad("%s path %q, want /healthz", name, pr.HTTPGet.Path)
		}
		if pr.HTTPGet.Port.String() != "metrics" {
			bad("%s port %q, want the named port metrics", name, pr.HTTPGet.Port.String())
		}
	}
	return p
}

// goMemLimit parses a GOMEMLIMIT value: a byte count with an optional B, KiB,
// MiB, GiB or TiB suffix (runtime/debug.SetMemoryLimit).
func goMemLimit(s string) (int64, error) {
	mult := int64(1)
	for i, suf := range []string{"TiB", "GiB", "MiB", "KiB", "B"} {
		if v, ok := strings.CutSuffix(s, suf); ok {
			s, mult = v, int64(1)<<(10*(4-i))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GOMEMLIMIT %q: not a size", s)
	}
	return n * mult, nil
}

// flagValue returns the value of --name in args ("--name v" or "--name=v").
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestEaddrAcceptsArgs runs the real flag parser on the DaemonSet's args: `eaddr
// trace ARGS --help` fails on an unknown flag or a bad value before it prints the
// usage. Each --flag must also be listed in that usage.
func TestEaddrAcceptsArgs(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot run eaddr trace --help")
	}
	ds := eaddrDaemonSet(t)
	args := ds.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "trace" {
		t.Fatalf("args %v do not start with trace", args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append(append([]string{"run", "./cmd/eaddr"}, args...), "--help")...)
	cmd.Dir = ".." // the repository root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./cmd/eaddr %s --help: %v\n%s", strings.Join(args, " "), err, out)
	}
	usage := string(out)
	if !strings.Contains(usage, "Usage: eaddr trace") {
		t.Fatalf("no trace usage in the output:\n%s", usage)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`).FindAllStringSubmatch(usage, -1) {
		listed[m[1]] = true
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !listed[name] {
			t.Errorf("%s is not a flag of eaddr trace (--help lists %d flags)", name, len(listed))
		}
	}
}

// TestCapabilitiesAreDocumented: the capabilities added in the manifest, the
// one-line reasons in its comments and the table in docs/kubernetes.md name the
// same set.
func TestCapabilitiesAreDocumented(t *testing.T) {
	ds := eaddrDaemonSet(t)
	var added []string
	for _, c := range ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add {
		added = append(added, string(c))
	}
	slices.Sort(added)

	raw, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range added {
		if !regexp.MustCompile(`(?m)^\s*# ` + c + `: \S`).Match(raw) {
			t.Errorf("%s: capability %s has no \"# %s: why\" comment", daemonSetFile, c, c)
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The rows "| `CAP_X` | ... |" of the section headed "Capabilities", up to the
	// next heading.
	loc := regexp.MustCompile(`(?m)^#+ Capabilities\n`).FindIndex(doc)
	if loc == nil {
		t.Fatal("docs/kubernetes.md has no \"Capabilities\" section")
	}
	section := string(doc[loc[1]:])
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `CAP_([A-Z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if !slices.Equal(added, documented) {
		t.Errorf("the manifest adds %v, docs/kubernetes.md's capability table lists %v", added, documented)
	}
	if !slices.Equal(added, wantCaps) {
		t.Errorf("the manifest adds %v, the test expects %v", added, wantCaps)
	}
}

// A DaemonSet document that decodes; the broken cases below change one thing.
const goodDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: x
  namespace: eaddr
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      hostPID: true
      containers:
        - name: x
          image: x
          securityContext:
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
              add: [BPF]
          volumeMounts:
            - {name: btf, mountPath: /sys/kernel/btf, readOnly: true}
      volumes:
        - name: btf
          hostPath: {path: /sys/kernel/btf, type: Directory}
`

func TestStrictDecodingRejects(t *testing.T) {
	if _, err := decodeStream("good", []byte(goodDaemonSet)); err != nil {
		t.Fatalf("the base document does not decode: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"field name in the wrong case", "hostPID: true", "hostPid: true", `unknown field "spec.template.spec.hostPid"`},
		{"misspelt field", "readOnlyRootFilesystem", "readOnlyRootFileSystem", "unknown field"},
		{"lower-case hostpath", "hostPath: {path", "hostpath: {path", `unknown field "spec.template.spec.volumes[0].hostpath"`},
		{"field at the wrong level", "      hostPID: true\n", "      hostPID: true\n      readOnly: true\n", `unknown field "spec.template.spec.readOnly"`},
		{"duplicate key", "hostPID: true", "hostPID: true\n      hostPID: false", "already set"},
		{"wrong type", "hostPID: true", `hostPID: "yes"`, "cannot unmarshal"},
		{"string for a list", "add: [BPF]", "add: BPF", "cannot unmarshal"},
		{"unknown kind", "kind: DaemonSet", "kind: DaemonSett", "not expected"},
		{"wrong apiVersion", "apiVersion: apps/v1", "apiVersion: extensions/v1beta1", "not expected"},
		{"missing kind", "kind: DaemonSet\n", "", "kind"},
		{"kind eaddr does not need", "apiVersion: apps/v1\nkind: DaemonSet", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole", "not expected"},
		{"not YAML", "      hostPID: true\n", "      hostPID: [true\n", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(goodDaemonSet, tc.old, tc.new, 1)
			if doc == goodDaemonSet {
				t.Fatalf("the case changes nothing: %q not found", tc.old)
			}
			// As the second document of a stream, behind a valid one.
			stream := "apiVersion: v1\nkind: Namespace\nmetadata: {name: eaddr}\n---\n" + doc
			_, err := decodeStream("broken.yaml", []byte(stream))
			if err == nil {
				t.Fatalf("decoded without error:\n%s", doc)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "document 2") {
				t.Errorf("error %q does not say which document", err)
			}
		})
	}
}

// TestChecksRejectWeakenedDaemonSet changes one thing in the real DaemonSet and
// expects checkDaemonSet to say so.
func TestChecksRejectWeakenedDaemonSet(t *testing.T) {
	base := eaddrDaemonSet(t)
	if p := checkDaemonSet(base); len(p) != 0 {
		t.Fatalf("the DaemonSet itself has problems: %v", p)
	}
	yes, no := true, false
	for _, tc := range []struct {
		name   string
		change func(*appsv1.DaemonSet)
		want   string
	}{
		{"privileged", func(d *appsv1.DaemonSet) { sc(d).Privileged = &yes }, "privileged: true"},
		{"CAP_ prefix", func(d *appsv1.DaemonSet) { sc(d).Capabilities.Add[0] = "CAP_BPF" }, "without CAP_"},
		{"extra capability", func(d *appsv1.DaemonSet) {
			sc(d).Capabilities.Add = append(sc(d).Capabilities.Add, "NET_ADMIN")
		}, "want exactly"},
		{"missing capability", func(d *appsv1.DaemonSet) { sc(d).Capabilities.Add = sc(d).Capabilities.Add[1:] }, "want exactly"},
		{"drop not ALL", func(d *appsv1.DaemonSet) { sc(d).Capabilities.Drop = []corev1.Capability{"NET_RAW"} }, "want [ALL]"},
		{"no hostPID", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.HostPID = false }, "hostPID"},
		{"hostNetwork", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.HostNetwork = true }, "hostNetwork"},
		{"writable host path", func(d *appsv1.DaemonSet) { mount(d, "cgroup").ReadOnly = false }, "readOnly"},
		{"host path elsewhere", func(d *appsv1.DaemonSet) { mount(d, "btf").MountPath = "/host/btf" }, "same path"},
		{"writable root", func(d *appsv1.DaemonSet) { sc(d).ReadOnlyRootFilesystem = &no }, "readOnlyRootFilesystem"},
		{"no privilege escalation", func(d *appsv1.DaemonSet) { sc(d).AllowPrivilegeEscalation = &no }, "allowPrivilegeEscalation"},
		{"seccomp unconfined", func(d *appsv1.DaemonSet) {
			sc(d).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, "seccompProfile"},
		{"NODE_NAME from the pod name", func(d *appsv1.DaemonSet) {
			env(d, "NODE_NAME").ValueFrom.FieldRef.FieldPath = "metadata.name"
		}, "NODE_NAME"},
		{"limit below request", func(d *appsv1.DaemonSet) {
			ctr(d).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("32Mi")
		}, "below the request"},
		{"no CPU limit", func(d *appsv1.DaemonSet) { delete(ctr(d).Resources.Limits, corev1.ResourceCPU) }, "cpu request and limit"},
		{"GOMEMLIMIT above the limit", func(d *appsv1.DaemonSet) { env(d, "GOMEMLIMIT").Value = "300MiB" }, "GOMEMLIMIT"},
		{"probe on a number", func(d *appsv1.DaemonSet) {
			ctr(d).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9630)
		}, "named port metrics"},
		{"probe path", func(d *appsv1.DaemonSet) { ctr(d).ReadinessProbe.HTTPGet.Path = "/metrics" }, "/healthz"},
		{"metrics port differs", func(d *appsv1.DaemonSet) { ctr(d).Ports[0].ContainerPort = 9631 }, "--metrics-addr"},
		{"CRI endpoint not the mounted socket", func(d *appsv1.DaemonSet) {
			a := ctr(d).Args
			a[slices.Index(a, "--cri-endpoint")+1] = "/host/run/containerd/containerd.sock"
		}, "--cri-endpoint"},
		{"no toleration", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Tolerations = nil }, "tolerations"},
		{"token mounted", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.AutomountServiceAccountToken = &yes }, "automountServiceAccountToken"},
		{"surge update", func(d *appsv1.DaemonSet) {
			two := intstr.FromInt32(2)
			d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &two
		}, "maxUnavailable 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base.DeepCopy()
			tc.change(d)
			p := checkDaemonSet(d)
			if len(p) == 0 {
				t.Fatal("no problem reported")
			}
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("problems %q do not mention %q", p, tc.want)
			}
		})
	}
}

// TestCRIDirectoryVariantPasses: docs/kubernetes.md's variant that mounts the
// runtime's socket directory instead of the socket passes the checks.
func TestCRIDirectoryVariantPasses(t *testing.T) {
	d := eaddrDaemonSet(t).DeepCopy()
	m := mount(d, "cri-socket")
	m.MountPath = "/run/containerd"
	prop := corev1.MountPropagationHostToContainer
	m.MountPropagation = &prop
	dir := corev1.HostPathDirectory
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "cri-socket" {
			d.Spec.Template.Spec.Volumes[i].HostPath = &corev1.HostPathVolumeSource{Path: "/run/containerd", Type: &dir}
		}
	}
	if p := checkDaemonSet(d); len(p) != 0 {
		t.Errorf("the directory variant has problems: %q", p)
	}
}

func ctr(d *appsv1.DaemonSet) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }

func sc(d *appsv1.DaemonSet) *corev1.SecurityContext { return ctr(d).SecurityContext }

func mount(d *appsv1.DaemonSet, name string) *corev1.VolumeMount {
	c := ctr(d)
	return &c.VolumeMounts[slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name })]
}

func env(d *appsv1.DaemonSet, name string) *corev1.EnvVar {
	c := ctr(d)
	return &c.Env[slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })]
}
