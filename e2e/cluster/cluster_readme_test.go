package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubecluster"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// readmeSection is the README section whose first sh block the cluster
// tier runs.
const readmeSection = "## On a Kubernetes node"

// readmeCommands returns the commands of the first ```sh block of
// README.md's readmeSection (shellLines), TAG and NODE replaced by tag and
// node.
func readmeCommands(t *testing.T, tag, node string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+readmeSection+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", readmeSection)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, closed := strings.Cut(block, "\n```")
	if !ok || !closed {
		t.Fatalf("README.md's %q has no ```sh block", readmeSection)
	}
	var cmds []string
	for _, c := range shellLines(block) {
		cmds = append(cmds, strings.NewReplacer("TAG", tag, "NODE", node).Replace(c))
	}
	return cmds
}

// shCommands are the commands of every ```sh block of the document at
// path, in order (shellLines).
func shCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	parts := strings.Split(string(b), "```")
	for i := 1; i < len(parts); i += 2 {
		if block, ok := strings.CutPrefix(parts[i], "sh\n"); ok {
			cmds = append(cmds, shellLines(block)...)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no command in a ```sh block", path)
	}
	return cmds
}

// shellLines are the commands of a shell block: comments (" #" to the end
// of a line, or a line that starts with #) cut, backslash continuations
// joined, runs of spaces made one.
func shellLines(block string) []string {
	var cmds []string
	var cur string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			l = ""
		}
		l, _, _ = strings.Cut(l, " #")
		l = strings.TrimSpace(l)
		cont := strings.HasSuffix(l, "\\")
		cur += " " + strings.TrimSuffix(l, "\\")
		if !cont {
			if c := strings.Join(strings.Fields(cur), " "); c != "" {
				cmds = append(cmds, c)
			}
			cur = ""
		}
	}
	return cmds
}

// readmeCommand returns the one command of the README's block that starts
// with prefix, as fields.
func readmeCommand(t *testing.T, cmds []string, prefix string) []string {
	t.Helper()
	i := slices.IndexFunc(cmds, func(c string) bool { return strings.HasPrefix(c, prefix) })
	if i < 0 {
		t.Fatalf("README.md's %q block has no command %q...; its commands:\n%s", readmeSection, prefix, strings.Join(cmds, "\n"))
	}
	return strings.Fields(cmds[i])
}

// readmeInstall runs README.md's install path, its own words: `kubectl
// apply -k deploy/kube-events` (which the README says to run instead of
// the block's deploy/base for Events), then the block's `kubectl -n eaddr
// set image` with the tag make image printed, both from the repository's
// top directory as the README's relative paths say. It returns eaddr's pod
// once Running and attached.
func readmeInstall(t *testing.T, k *kubetest.Kubectl, tag string) string {
	t.Helper()
	cmds := readmeCommands(t, tag, kubecluster.NodeName)
	apply := readmeCommand(t, cmds, "kubectl apply -k ")
	if want := []string{"kubectl", "apply", "-k", "deploy/base"}; !slices.Equal(apply, want) {
		t.Fatalf("README.md's block says %q, the test runs its deploy/kube-events variant of %q", apply, want)
	}
	readme, _ := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if !bytes.Contains(readme, []byte("`kubectl apply -k deploy/kube-events` instead runs it with `--kube-events`")) {
		t.Fatal("README.md no longer says \"`kubectl apply -k deploy/kube-events` instead runs it with `--kube-events`\", which this test runs")
	}
	apply[3] = "deploy/kube-events"
	setImage := readmeCommand(t, cmds, "kubectl -n eaddr set image ")
	if want := "eaddr=localhost/eaddr:" + tag; setImage[len(setImage)-1] != want {
		t.Fatalf("README.md's set image is %q, want it to end in %s", setImage, want)
	}
	begin := time.Now()
	for _, cmd := range [][]string{apply, setImage} {
		out, err := kubectlInRepo(t, k, cmd[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("$ %s\n%s", strings.Join(cmd, " "), out)
	}
	pod := waitDaemonSetPod(t, k)
	t.Logf("DaemonSet pod %s Running %s after kubectl apply", pod, time.Since(begin).Round(100*time.Millisecond))
	line := waitLogLine(t, k, []string{"-n", "eaddr", pod}, func(l string) bool { return strings.Contains(l, "level=INFO msg=attached") })
	t.Logf("eaddr's log: %s (%s after kubectl apply)", line, time.Since(begin).Round(100*time.Millisecond))
	image, _, err := k.Run(nil, "-n", "eaddr", "get", "pod", pod, "-o", "jsonpath={.spec.containers[0].image}")
	if err != nil || string(image) != "localhost/eaddr:"+tag {
		t.Errorf("eaddr's pod runs image %q (%v), want localhost/eaddr:%s", image, err, tag)
	}
	return pod
}

// kubectlInRepo runs k's kubectl in the repository's top directory, where
// README.md's relative paths point, and returns stdout and stderr.
func kubectlInRepo(t *testing.T, k *kubetest.Kubectl, args ...string) ([]byte, error) {
	t.Helper()
	in := *k
	in.Dir = repoRoot(t)
	stdout, stderr, err := in.Run(nil, args...)
	return append(stdout, stderr...), err
}
