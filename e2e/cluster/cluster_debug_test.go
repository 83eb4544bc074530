package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubecluster"
)

// debugPodName is the pod kubectl debug says it made.
var debugPodName = regexp.MustCompile(`\bnode-debugger-\S+-[a-z0-9]{5}\b`)

// debug runs README.md's `kubectl debug node/NODE --profile=sysadmin ...`
// (without -it, so that kubectl returns; its output read with `kubectl logs
// -f` of the pod it made) while the workload keeps failing. With -it the
// debug container has a terminal, where eaddr trace prints its text form;
// without one it would print JSON, so the test asks for the same form with
// -o text. The text shows busybox wget's EADDRNOTAVAIL in the workload's pod,
// named as the runtime names it, with the client's line, the cause and the
// fix under it. README.md and docs/kubernetes.md quote such a failure; the
// test checks that each quote is what eaddr printed, but for the per-run
// parts.
func (s *stories) debug(t *testing.T) {
	cmd := readmeCommand(t, readmeCommands(t, s.tag, kubecluster.NodeName), "kubectl debug node/")
	i := slices.Index(cmd, "-it")
	if i < 0 {
		t.Fatalf("README.md's debug command %q has no -it: this test drops it so that kubectl returns", cmd)
	}
	cmd = slices.Delete(cmd, i, i+1)
	if !slices.Contains(cmd, "-o") && !slices.Contains(cmd, "--output") {
		cmd = append(cmd, "-o", "text")
	}
	out, err := kubectlInRepo(t, s.k, cmd[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("$ %s\n%s", strings.Join(cmd, " "), out)
	pod := debugPodName.FindString(string(out))
	if pod == "" {
		t.Fatalf("kubectl debug named no node-debugger pod: %s", out)
	}
	t.Cleanup(func() { s.k.Run(nil, "delete", "pod", pod, "--wait=false") })
	s.waitReady(t, pod)
	block := s.followText(t, pod)
	t.Logf("the debug pod printed:\n%s", strings.Join(block, "\n"))
	if want := "  pod e2e/" + s.client + " container client · pid "; !strings.Contains(block[0], want) {
		t.Errorf("the failure does not name the pod %q:\n%s", want, block[0])
	}
	for _, doc := range []string{"../README.md", "../docs/kubernetes.md"} {
		if err := textExcerpt(doc, block); err != nil {
			t.Error(err)
		}
	}
}

// followText follows `kubectl logs -f` of the debug pod until a failure of
// wget in the workload's pod, and returns its lines (up to the blank line
// that ends it); it fails after 90 s with what it read.
func (s *stories) followText(t *testing.T, pod string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.k.Bin, "logs", "-f", pod)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + s.k.Kubeconfig}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cancel()
	var seen, block []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		l := sc.Text()
		seen = append(seen, l)
		switch {
		case len(block) > 0 && l == "":
			if slices.ContainsFunc(block, func(l string) bool { return strings.HasPrefix(l, "  fix ") }) {
				return block
			}
			block = nil
		case len(block) > 0:
			block = append(block, l)
		case whoLine.MatchString(l) && strings.Contains(l, " pod e2e/"+s.client+" ") && strings.HasSuffix(l, " wget"):
			block = []string{l}
		}
	}
	t.Fatalf("kubectl logs -f %s: no failure of wget in pod %s with its fix within 90 s (%v); it printed:\n%s",
		pod, s.client, ctx.Err(), lastN(strings.Join(seen, "\n"), 40))
	return nil
}

// whoLine is the first line of a failure in eaddr's text form.
var whoLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} \S+  \S`)

// textPerRun are the parts of a failure's text that differ per run.
var textPerRun = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b(e2e/[a-z0-9-]+?)-[a-z0-9]{6,10}-[a-z0-9]{5}\b`), "$1-RSHASH-XXXXX"}, // a Deployment's pod
	{regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} \S+`), "HH:MM:SS.mmm ZONE"},
	{regexp.MustCompile(`\bpid \d+\b`), "pid N"},
	{regexp.MustCompile(`\b\d{4,}\b`), "N"}, // pids, netns inodes
}

// textExcerpt checks the fenced block of doc whose first line is a failure
// of the workload's pod in the text form: the lines printed, but for the
// per-run parts, with runs of spaces and line breaks counted as one space
// (a pid of another length moves where a line wraps).
func textExcerpt(doc string, printed []string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	norm := func(ls []string) string {
		out := make([]string, len(ls))
		for i, l := range ls {
			for _, p := range textPerRun {
				l = p.re.ReplaceAllString(l, p.with)
			}
			out[i] = l
		}
		return strings.Join(strings.Fields(strings.Join(out, "\n")), " ")
	}
	var quotes []string
	for _, b := range strings.Split(string(data), "```")[1:] {
		lines := strings.Split(strings.TrimPrefix(b, "\n"), "\n")
		for i, l := range lines {
			if whoLine.MatchString(l) && strings.Contains(l, " pod e2e/client-") {
				end := slices.Index(lines[i:], "")
				if end < 0 {
					end = len(lines) - i
				}
				quotes = append(quotes, norm(lines[i:i+end]))
			}
		}
	}
	want := norm(printed)
	if len(quotes) == 0 {
		return fmt.Errorf("%s: no fenced block with a failure of the workload's pod; paste what the debug pod printed:\n%s", doc, strings.Join(printed, "\n"))
	}
	for _, q := range quotes {
		if q != want {
			return fmt.Errorf("%s: the quoted failure is not what the debug pod printed:\n quote   %q\n printed %q\npaste:\n%s",
				doc, q, want, strings.Join(printed, "\n"))
		}
	}
	return nil
}
