package deploy

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

	"github.com/eaddr/eaddr/internal/kubecluster"
	"github.com/eaddr/eaddr/output"
)

// debugPodName is the pod kubectl debug says it made.
var debugPodName = regexp.MustCompile(`\bnode-debugger-\S+-[a-z0-9]{5}\b`)

// debug runs README.md's `kubectl debug node/NODE --profile=sysadmin ...`
// (without -it, so that kubectl returns; its output read with `kubectl logs
// -f` of the pod it made) while the workload keeps failing: the table shows
// a row of busybox wget's EADDRNOTAVAIL in the workload's pod (found by its
// cgroup's pod UID; its POD column must name it, as the runtime does), with
// the client line and the verdict under it. docs/kubernetes.md quotes such a row; the test
// checks that the quote is what eaddr printed, but for the per-run parts.
func (s *stories) debug(t *testing.T) {
	cmd := readmeCommand(t, readmeCommands(t, s.tag, kubecluster.NodeName), "kubectl debug node/")
	i := slices.Index(cmd, "-it")
	if i < 0 {
		t.Fatalf("README.md's debug command %q has no -it: this test drops it so that kubectl returns", cmd)
	}
	cmd = slices.Delete(cmd, i, i+1)
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
	if _, _, err := s.k.Run(nil, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=90s"); err != nil {
		d, _, _ := s.k.Run(nil, "describe", "pod", pod)
		t.Fatalf("%v\n%s", err, d)
	}
	uid, _, err := s.k.Run(nil, "-n", "e2e", "get", "pod", s.client, "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	row := s.followTable(t, pod, string(uid))
	t.Logf("the debug pod printed:\n%s", strings.Join(row, "\n"))
	if want := " e2e/" + s.client + " "; !strings.Contains(row[0], want) {
		t.Errorf("the row does not name the pod %q in its POD column:\n%s\n%s", want, output.TableHeader, row[0])
	}
	if err := tableExcerpt("../docs/kubernetes.md", row); err != nil {
		t.Error(err)
	}
}

// followTable follows `kubectl logs -f` of the debug pod until the table's
// header and then a row of wget's EADDRNOTAVAIL in the pod of uid, with its
// two lines below (client, verdict), which it returns; it fails after 90 s
// with what it read.
func (s *stories) followTable(t *testing.T, pod, uid string) []string {
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
	var seen, row []string
	header := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		l := sc.Text()
		seen = append(seen, l)
		switch {
		case l == output.TableHeader:
			header = true
		case len(row) > 0:
			row = append(row, l)
			if len(row) == 3 {
				return row
			}
		case header && strings.Contains(l, " EADDRNOTAVAIL ") && strings.Contains(l, " wget ") && strings.Contains(l, "/pod"+uid+"/"):
			row = []string{l}
		}
	}
	t.Fatalf("kubectl logs -f %s: no table row of wget's EADDRNOTAVAIL in pod %s (uid %s) within 90 s (%v); it printed:\n%s",
		pod, s.client, uid, ctx.Err(), lastN(strings.Join(seen, "\n"), 40))
	return nil
}

// tablePerRun are the parts of a table row that differ per run.
var tablePerRun = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b(e2e/[a-z0-9-]+?)-[a-z0-9]{6,10}-[a-z0-9]{5}\b`), "$1-RSHASH-XXXXX"}, // a Deployment's pod
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{6}\b`), "HH:MM:SS.UUUUUU"},
	{regexp.MustCompile(`\bpod[0-9a-f-]{36}/[0-9a-f]{64}\b`), "podUID/CONTAINER"},
	{regexp.MustCompile(`\bpid \d+\b`), "pid N"},
	{regexp.MustCompile(`\b\d{4,}\b`), "N"}, // pids, netns inodes
}

// tableExcerpt checks the fenced block of doc that holds the table's
// header: the header, then the row and its two lines, as printed, but for
// the per-run parts (times, pids, inodes, the pod's UID and container ID);
// runs of spaces count as one.
func tableExcerpt(doc string, printed []string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	norm := func(l string) string {
		for _, p := range tablePerRun {
			l = p.re.ReplaceAllString(l, p.with)
		}
		return strings.Join(strings.Fields(l), " ")
	}
	var block []string
	for _, b := range strings.Split(string(data), "```")[1:] {
		lines := strings.Split(b, "\n")
		if i := slices.Index(lines, output.TableHeader); i >= 0 {
			if block != nil {
				return fmt.Errorf("%s: two fenced blocks with the table's header", doc)
			}
			block = lines[i+1:]
		}
	}
	want := append([]string{output.TableHeader}, printed...)
	if block == nil || len(block) < len(printed) {
		return fmt.Errorf("%s: no fenced block with the table's header and a row under it; paste what the debug pod printed:\n%s", doc, strings.Join(want, "\n"))
	}
	for i, l := range printed {
		if norm(block[i]) != norm(l) {
			return fmt.Errorf("%s: the table excerpt's line %d is not what the debug pod printed:\n excerpt %q\n printed %q\npaste:\n%s",
				doc, i+2, norm(block[i]), norm(l), strings.Join(want, "\n"))
		}
	}
	return nil
}
