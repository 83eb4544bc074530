package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/kubecluster"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// clusterImageTag is the VERSION `make image` is given here: the image is
// localhost/eaddr:cluster-test.
const clusterImageTag = "cluster-test"

// TestClusterInstall is the README's path on a real node
// (internal/testing/kubecluster: kubelet, containerd, kube-proxy), with the real
// kubectl, one cluster for every story (docs/testing.md, "The cluster
// tier"): `make image`, the archive imported into the node's containerd,
// then README.md's own commands (`kubectl apply -k deploy/kube-events`,
// `kubectl -n eaddr set image ...` with the tag make image printed), the
// DaemonSet's pod Running and its log saying attached. Then, each a subtest
// with its own assertions: a workload whose pod narrows its port range
// through securityContext.sysctls fails for real, and eaddr's `kubectl
// logs` and the workload's `kubectl describe pod` say so; a real
// Prometheus scrapes the count; the README's debug pod shows the failure;
// a log agent (the OpenTelemetry Collector) reads eaddr's log from
// /var/log/pods; the kubelet's probe from a NodePort source port; and
// docs/runbook.md's commands, from the pod's log to the fix applied.
func TestClusterInstall(t *testing.T) {
	testenv.RequireRoot(t)
	archive, tag := makeImagePrinted(t, clusterImageTag)
	c := kubecluster.StartWith(t, kubecluster.Options{PodLogsDir: "/var/log/pods"})
	names, err := c.ImportImage(archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %s as %v", filepath.Base(archive), names)
	pod := readmeInstall(t, c.Kubectl, tag)
	s := &stories{c: c, k: c.Kubectl, tag: tag, eaddrPod: pod}
	story := func(name string, f func(*testing.T)) bool {
		begin := time.Now()
		ok := t.Run(name, f)
		t.Logf("story %s: %s", name, time.Since(begin).Round(100*time.Millisecond))
		return ok
	}
	if !story("workload", s.workload) {
		return // the stories below look for this workload's failures
	}
	story("metrics", s.metrics)
	story("debug", s.debug)
	story("logagent", s.logAgent)
	story("nodeport", s.nodePort)
	story("runbook", s.runbook) // last: it changes the workload
}

// stories is what the stories of TestClusterInstall share: the cluster,
// its kubectl, the image tag, eaddr's pod and the failing workload's pod.
type stories struct {
	c        *kubecluster.Cluster
	k        *kubetest.Kubectl
	tag      string
	eaddrPod string
	client   string // the workload's pod, once it runs

	undoNarrow func() error // the nodeport story's host changes, while they last
}

// makeImage runs `make image` with VERSION tag into the test's temporary
// directory and returns the OCI archive.
func makeImage(t *testing.T, tag string) string {
	t.Helper()
	archive, _ := makeImagePrinted(t, tag)
	return archive
}

// madeImage is what `make image` prints: "ARCHIVE: localhost/eaddr:TAG, SIZE...".
var madeImage = regexp.MustCompile(`: localhost/eaddr:(\S+), `)

// makeImagePrinted is makeImage, and returns the tag make image printed,
// which README.md tells the operator to set (and which must be tag).
func makeImagePrinted(t *testing.T, tag string) (archive, printed string) {
	t.Helper()
	testenv.Program(t, "buildah", "buildah")
	testenv.Program(t, "make", "make")
	archive = filepath.Join(t.TempDir(), "eaddr-image.tar")
	begin := time.Now()
	cmd := exec.Command("make", "-C", repoRoot(t), "--no-print-directory", "image", "IMAGE_ARCHIVE="+archive, "VERSION="+tag)
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Dir(archive))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image in %v: %s", time.Since(begin).Round(time.Millisecond), strings.TrimSpace(string(out)))
	m := madeImage.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 || m[len(m)-1][1] != tag {
		t.Fatalf("make image VERSION=%s printed no \"localhost/eaddr:%s, \" line: %v", tag, tag, m)
	}
	return archive, m[len(m)-1][1]
}

// repoRoot is the repository's top directory, where README.md's commands
// run.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// imageOverlay writes a kustomization over deploy/dir that sets eaddr's
// image tag (images:) and returns its directory: a test's own overlay, the
// shipped files untouched.
func imageOverlay(t *testing.T, tag, dir string) string {
	t.Helper()
	base, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	rel, err := filepath.Rel(tmp, base) // kustomize refuses an absolute path
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: localhost/eaddr
    newTag: %s
`, rel, tag)
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// waitDaemonSetPod waits for the rollout of eaddr's DaemonSet and for its
// one pod (a replaced one gone) and returns the pod's name; on a timeout it
// fails with kubectl describe of the pods.
func waitDaemonSetPod(t *testing.T, k *kubetest.Kubectl) string {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		out, _, _ := k.Run(nil, "-n", "eaddr", "describe", "pods")
		t.Fatalf(format+"\n%s", append(args, out)...)
	}
	if _, _, err := k.Run(nil, "-n", "eaddr", "rollout", "status", "daemonset/eaddr", "--timeout=100s"); err != nil {
		fail("%v", err)
	}
	var out []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		out, _, err = k.Run(nil, "-n", "eaddr", "get", "pods", "-l", "app=eaddr", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(out)); len(f) == 2 && f[1] == "Running" {
			return f[0]
		}
	}
	fail("eaddr's pods: %q, want one Running", out)
	return ""
}

// waitLogLine polls `kubectl logs ARGS` until a line matches, and returns
// it; it fails after 2 minutes with the log.
func waitLogLine(t *testing.T, k *kubetest.Kubectl, args []string, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var out []byte
	var err error
	for time.Now().Before(deadline) {
		out, _, err = k.Run(nil, append([]string{"logs"}, args...)...)
		if err == nil {
			for _, l := range strings.Split(string(out), "\n") {
				if match(l) {
					return l
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("kubectl logs %s: no matching line within 2 minutes (%v):\n%s", strings.Join(args, " "), err, lastN(string(out), 40))
	return ""
}

func lastN(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// workload is a Deployment whose pod narrows its ephemeral port range to
// two ports (a safe sysctl, allowed by the kubelet and by Pod Security's
// baseline), holds both with two nc clients toward an nc server of its own
// on 127.0.0.1:8080, and then runs busybox wget toward it every 2 s, which
// fails with EADDRNOTAVAIL.
const workload = `apiVersion: v1
kind: Namespace
metadata:
  name: e2e
  labels:
    pod-security.kubernetes.io/enforce: baseline
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: client
  namespace: e2e
spec:
  replicas: 1
  selector:
    matchLabels: {app: client}
  template:
    metadata:
      labels: {app: client, tier: e2e}
    spec:
      securityContext:
        sysctls:
          - name: net.ipv4.ip_local_port_range
            value: "40000 40001"
      terminationGracePeriodSeconds: 1
      containers:
        - name: client
          image: ` + critest.Image + `
          imagePullPolicy: Never
          command:
            - sh
            - -c
            - |
              nc -ll -p 8080 -e /bin/cat &
              sleep 1
              sleep 100000 | nc 127.0.0.1 8080 &
              sleep 100000 | nc 127.0.0.1 8080 &
              sleep 1
              while true; do wget -q -O /dev/null http://127.0.0.1:8080/; echo "wget exit $?"; sleep 2; done
`

// workload runs the workload and finds its failure in eaddr's log
// (schema-valid, with the pod's name, namespace, container and labels) and
// eaddr's Warning Event in kubectl describe pod.
func (s *stories) workload(t *testing.T) {
	k := s.k
	if _, _, err := k.Run([]byte(workload), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Run(nil, "-n", "e2e", "rollout", "status", "deployment/client", "--timeout=100s"); err != nil {
		out, _, _ := k.Run(nil, "-n", "e2e", "describe", "pods")
		t.Fatalf("%v\n%s", err, out)
	}
	out, _, err := k.Run(nil, "-n", "e2e", "get", "pods", "-l", "app=client", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	client := string(out)
	waitLogLine(t, k, []string{"-n", "e2e", client}, func(l string) bool { return strings.HasPrefix(l, "wget exit 1") })
	line := waitLogLine(t, k, []string{"-n", "eaddr", s.eaddrPod}, func(l string) bool {
		return strings.Contains(l, `"errno":"EADDRNOTAVAIL"`) && strings.Contains(l, `"name":"`+client+`"`)
	})
	t.Logf("eaddr: %s", line)
	testenv.ValidateLine(t, line)
	checkEventPod(t, line, client)
	describeShowsEvent(t, k, client)
	s.client = client
}

// checkEventPod checks the pod object of eaddr's JSON line.
func checkEventPod(t *testing.T, line, client string) {
	t.Helper()
	var e struct {
		Syscall string `json:"syscall"`
		Pod     struct {
			Name, Namespace, Container string
			Labels                     map[string]string
		} `json:"pod"`
	}
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatal(err)
	}
	p := e.Pod
	if e.Syscall != "connect" || p.Name != client || p.Namespace != "e2e" || p.Container != "client" ||
		p.Labels["app"] != "client" || p.Labels["tier"] != "e2e" {
		t.Errorf("event %+v: want connect in pod e2e/%s, container client, labels app=client tier=e2e", e, client)
	}
}

// describeShowsEvent waits until `kubectl describe pod` of the client shows
// eaddr's Warning Event.
func describeShowsEvent(t *testing.T, k *kubetest.Kubectl, client string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var out []byte
	for time.Now().Before(deadline) {
		out, _, _ = k.Run(nil, "-n", "e2e", "describe", "pod", client)
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && f[0] == "Warning" && f[1] == "EphemeralPortsExhausted" && strings.Contains(l, "eaddr.io/eaddr") {
				t.Logf("kubectl describe pod %s:\n%s", client, l)
				return
			}
		}
		time.Sleep(time.Second)
	}
	t.Errorf("kubectl describe pod %s shows no Warning EphemeralPortsExhausted from eaddr.io/eaddr:\n%s", client, out)
}
