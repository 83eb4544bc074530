package kubetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KubectlTimeout bounds one kubectl run.
const KubectlTimeout = 2 * time.Minute

// Kubectl runs the real kubectl of Version (KubectlBinary, from the cache;
// never the kubectl on PATH) with a HOME of its own, so that nothing of the
// user's ~/.kube (kubeconfig, kuberc preferences, discovery cache) changes
// what it does, and with Kubeconfig as its only kubeconfig.
type Kubectl struct {
	Bin        string
	Kubeconfig string        // $KUBECONFIG for kubectl; empty: none (kubectl kustomize needs none)
	Timeout    time.Duration // bounds one run; 0: KubectlTimeout
	Dir        string        // its working directory; empty: the test's
	home       string
}

// NewKubectl returns a kubectl with no kubeconfig, for the commands that
// need no API server (kubectl kustomize); it builds kubectl first when it is
// not cached (Binary).
func NewKubectl(t testing.TB) *Kubectl {
	t.Helper()
	return &Kubectl{Bin: KubectlBinary(t), home: t.TempDir()}
}

// Kubectl returns a kubectl whose kubeconfig is the admin's of s
// (WriteKubeconfig).
func (s *Server) Kubectl(t testing.TB) *Kubectl {
	t.Helper()
	k := NewKubectl(t)
	k.Kubeconfig = s.WriteKubeconfig(t, "")
	return k
}

// Run runs kubectl with args, stdin as its standard input (none when nil),
// and returns what it wrote to stdout and stderr. err is non-nil when it did
// not exit 0; its text has the command line and the stderr. A kubectl still
// running after Timeout (KubectlTimeout when 0) gets SIGQUIT, so that the Go
// runtime writes its goroutines to stderr, and err says where its main
// goroutine was (hung): waiting on the API server or in its own work.
func (k *Kubectl) Run(stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	timeout := cmp.Or(k.Timeout, KubectlTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.Bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second // then SIGKILL
	cmd.Dir = k.Dir
	cmd.Env = append(kubectlEnv(os.Environ()), "HOME="+k.home, "KUBECONFIG="+k.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return out.Bytes(), errOut.Bytes(), fmt.Errorf("kubectl %s: still running after %s, sent SIGQUIT (%v); %s", strings.Join(args, " "), timeout, err, hung(errOut.Bytes()))
		}
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// hung picks from a Go program's SIGQUIT dump (stderr) what it wrote before
// the dump and the stack of goroutine 1, main's, where kubectl does its work:
// the rest of the dump is the runtime's, client-go's and klog's goroutines.
func hung(stderr []byte) string {
	before, dump, ok := bytes.Cut(stderr, []byte("SIGQUIT: quit"))
	if !ok {
		return fmt.Sprintf("no goroutine dump; its stderr:\n%s", bytes.TrimSpace(stderr))
	}
	n := bytes.Count(dump, []byte("\ngoroutine "))
	i := bytes.Index(dump, []byte("\ngoroutine 1 ")) // "goroutine 1 gp=… m=… [sleep]:"
	if i < 0 {
		return fmt.Sprintf("its stderr before the dump:\n%s\n(no goroutine 1 among %d)", bytes.TrimSpace(before), n)
	}
	main, _, _ := bytes.Cut(dump[i+1:], []byte("\n\n"))
	return fmt.Sprintf("its stderr before the dump:\n%s\nits main goroutine (1 of %d):\n%s", bytes.TrimSpace(before), n, main)
}

// kubectlEnv is env without what would change kubectl's behaviour from
// outside the test: HOME and KUBECONFIG (set by Run), KUBERC and the
// KUBECTL_* switches (alpha features, kuberc, the remote command protocol).
func kubectlEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || k == "KUBERC" || strings.HasPrefix(k, "KUBECTL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
