package helmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Timeout bounds one helm run.
const Timeout = 3 * time.Minute

// Helm runs the real helm of Version (Binary, from the cache; never a helm
// on PATH) with a HOME and Helm cache, config and data directories of its
// own, and with Kubeconfig as its only kubeconfig.
type Helm struct {
	Bin        string
	Kubeconfig string // $KUBECONFIG; empty: none (helm lint and helm template need none)
	home       string
}

// New returns a helm with no kubeconfig; it builds helm first when it is not
// cached (Binary).
func New(t testing.TB) *Helm {
	t.Helper()
	return &Helm{Bin: Binary(t), home: t.TempDir()}
}

// Run runs helm with args, stdin as its standard input (none when nil), and
// returns what it wrote to stdout and stderr. err is non-nil when it did not
// exit 0; its text has the command line and the stderr.
func (h *Helm) Run(stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(helmEnv(os.Environ()),
		"HOME="+h.home,
		"KUBECONFIG="+h.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// helmEnv is env without what would change helm's behaviour from outside the
// test: HOME, KUBECONFIG, the XDG directories helm's defaults come from, and
// every HELM_* setting (namespace, drivers, registry and repository files,
// debug, plugins).
func helmEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "KUBECONFIG" || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "HELM_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
