package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	Kubeconfig string // $KUBECONFIG for kubectl; empty: none (kubectl kustomize needs none)
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
// not exit 0; its text has the command line and the stderr.
func (k *Kubectl) Run(stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), KubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.Bin, args...)
	cmd.Env = append(kubectlEnv(os.Environ()), "HOME="+k.home, "KUBECONFIG="+k.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), errOut.Bytes(), nil
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
