package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubecluster"
)

// runbookDoc is the page an operator starts from when a pod fails.
const runbookDoc = "../docs/runbook.md"

// runbook runs docs/runbook.md's commands in order, as written but for
// its capitals (the workload's pod, its Deployment, the node, the image's
// tag, and SYSCTLS, taken from the fix eaddr printed), on the workload whose
// pod fails: explain reads its log, top and trace in node debug pods name
// it, its cause and the fix, the fix applied to the Deployment as printed
// makes a new pod with the wider range, and top then shows that pod far
// from full. A debug pod's command runs without -it, so that kubectl
// returns; trace gets -o text, the form -it's terminal gets. It runs last:
// it changes the workload.
func (s *stories) runbook(t *testing.T) {
	bin := eaddrOnPath(t)
	words := map[string]string{"NAMESPACE": "e2e", "POD": s.client, "DEPLOYMENT": "client", "NODE": kubecluster.NodeName, "TAG": s.tag}
	var topRuns int
	for _, c := range shCommands(t, runbookDoc) {
		cmd := replaceWords(c, words)
		switch {
		case strings.Contains(cmd, "| eaddr explain"):
			out := s.shell(t, bin, cmd)
			wantAll(t, cmd, out, "EADDRNOTAVAIL (99) in connect()", "busybox wget", "nsenter -t PID -n ss")
		case strings.HasPrefix(cmd, "kubectl debug node/") && strings.Contains(cmd, "/eaddr top --once"):
			out := s.debugOnce(t, cmd)
			if topRuns++; topRuns == 1 {
				wantPodRow(t, out, s.client, "2/2", true)
			} else {
				wantPodRow(t, out, s.newClient(t), "/57454", false)
			}
		case strings.HasPrefix(cmd, "kubectl debug node/") && strings.Contains(cmd, "--errno ETIMEDOUT"):
			s.debugAttached(t, cmd)
		case strings.HasPrefix(cmd, "kubectl debug node/"):
			block := s.debugTrace(t, cmd)
			words["SYSCTLS"] = sysctlsOf(t, block)
		default:
			out := s.shell(t, bin, cmd)
			if strings.Contains(cmd, " get pod ") {
				wantAll(t, cmd, out, kubecluster.NodeName)
			}
		}
	}
	if topRuns != 2 || words["SYSCTLS"] == "" {
		t.Errorf("the runbook ran top --once %d times (want 2: before and after the fix) and gave SYSCTLS %q", topRuns, words["SYSCTLS"])
	}
}

// eaddrOnPath builds eaddr into a directory of its own, for the runbook's
// `| eaddr explain`, and returns that directory.
func eaddrOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "eaddr"), "../cmd/eaddr").CombinedOutput(); err != nil {
		t.Fatalf("go build eaddr: %v\n%s", err, out)
	}
	return dir
}

// shell runs cmd with sh from the repository's top directory, kubectl and
// eaddr on its PATH and the cluster's kubeconfig, as an operator's shell
// would; it fails the test when cmd fails.
func (s *stories) shell(t *testing.T, bin, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", cmd)
	sh.Dir = repoRoot(t)
	sh.Env = []string{"PATH=" + filepath.Dir(s.k.Bin) + ":" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + s.k.Kubeconfig}
	if filepath.Base(s.k.Bin) != "kubectl" { // the cache names it kubectl-VERSION
		link := filepath.Join(bin, "kubectl")
		if err := os.Symlink(s.k.Bin, link); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	out, err := sh.CombinedOutput()
	t.Logf("$ %s\n%s", cmd, out)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out)
}

// replaceWords replaces each capital placeholder of cmd, as a whole word.
func replaceWords(cmd string, words map[string]string) string {
	return placeholder.ReplaceAllStringFunc(cmd, func(w string) string {
		if v, ok := words[w]; ok {
			return v
		}
		return w
	})
}

var placeholder = regexp.MustCompile(`\b[A-Z]{3,}\b`)

// debugArgs are cmd's words for kubectl without "kubectl" and -it, and with
// extra after the command's own.
func debugArgs(cmd string, extra ...string) []string {
	var args []string
	for _, w := range strings.Fields(cmd)[1:] {
		if w != "-it" {
			args = append(args, w)
		}
	}
	return append(args, extra...)
}

// startDebug runs a debug command and returns the pod it made, deleted when
// the test ends.
func (s *stories) startDebug(t *testing.T, args []string) string {
	t.Helper()
	out, err := kubectlInRepo(t, s.k, args...)
	t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatal(err)
	}
	pod := debugPodName.FindString(string(out))
	if pod == "" {
		t.Fatalf("kubectl debug named no node-debugger pod: %s", out)
	}
	t.Cleanup(func() { s.k.Run(nil, "delete", "pod", pod, "--wait=false") })
	return pod
}

// waitReady waits until a debug pod that keeps running is Ready, so that
// its log can be followed.
func (s *stories) waitReady(t *testing.T, pod string) {
	t.Helper()
	if _, _, err := s.k.Run(nil, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=90s"); err != nil {
		d, _, _ := s.k.Run(nil, "describe", "pod", pod)
		t.Fatalf("%v\n%s", err, d)
	}
}

// debugOnce runs a debug command whose eaddr exits by itself (top --once)
// and returns what it printed.
func (s *stories) debugOnce(t *testing.T, cmd string) string {
	t.Helper()
	pod := s.startDebug(t, debugArgs(cmd))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		phase, _, _ := s.k.Run(nil, "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		if p := string(phase); p == "Succeeded" || p == "Failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end within 2 minutes", pod)
		}
		time.Sleep(500 * time.Millisecond)
	}
	out, _, err := s.k.Run(nil, "logs", pod)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s printed:\n%s", pod, out)
	return string(out)
}

// debugTrace runs a trace debug command and returns the first failure of
// the workload's pod that it prints with its fix.
func (s *stories) debugTrace(t *testing.T, cmd string) []string {
	t.Helper()
	pod := s.startDebug(t, debugArgs(cmd, "-o", "text"))
	s.waitReady(t, pod)
	block := s.followText(t, pod)
	t.Logf("%s printed:\n%s", pod, strings.Join(block, "\n"))
	return block
}

// debugAttached runs a trace debug command that has nothing to show (no
// timeout happens) and waits until it says it attached.
func (s *stories) debugAttached(t *testing.T, cmd string) {
	t.Helper()
	pod := s.startDebug(t, debugArgs(cmd, "-o", "text"))
	s.waitReady(t, pod)
	waitLogLine(t, s.k, []string{pod}, func(l string) bool { return strings.Contains(l, "msg=attached") })
}

// sysctlsOf is the list a pod range fix gives after
// spec.securityContext.sysctls:, its lines joined.
func sysctlsOf(t *testing.T, block []string) string {
	t.Helper()
	joined := strings.Join(strings.Fields(strings.Join(block, " ")), " ")
	m := sysctlsList.FindStringSubmatch(joined)
	if m == nil {
		t.Fatalf("no spec.securityContext.sysctls fix in:\n%s", strings.Join(block, "\n"))
	}
	return m[1]
}

var sysctlsList = regexp.MustCompile(`spec\.securityContext\.sysctls: (\[\{name: .*?\}\])`)

// newClient is the workload's pod after the fix's rollout.
func (s *stories) newClient(t *testing.T) string {
	t.Helper()
	out, _, err := s.k.Run(nil, "-n", "e2e", "get", "pods", "-l", "app=client", "--field-selector=status.phase=Running",
		"-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != s.client {
			return p
		}
	}
	t.Fatalf("no new pod of the workload after the fix: %q", out)
	return ""
}

// wantPodRow checks top's row of pod: its TAKEN/USABLE cell contains
// taken, and a fix is under it, or not.
func wantPodRow(t *testing.T, out, pod, taken string, fix bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "e2e/"+pod+" ") {
			continue
		}
		if !strings.Contains(l, taken) {
			t.Errorf("top's row of %s does not show %q:\n%s", pod, taken, l)
		}
		under := i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "held by:")
		if under != fix {
			t.Errorf("top's row of %s: holders and fix under it %v, want %v:\n%s", pod, under, fix, out)
		}
		return
	}
	t.Errorf("top shows no row of e2e/%s:\n%s", pod, out)
}

func wantAll(t *testing.T, cmd, out string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(out, sub) {
			t.Errorf("%s: the output lacks %q", cmd, sub)
		}
	}
}
