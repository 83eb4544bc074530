package helmtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHelmEnv(t *testing.T) {
	got := helmEnv([]string{"PATH=/bin", "HOME=/root", "KUBECONFIG=/k", "HELM_NAMESPACE=x", "HELM_DEBUG=1",
		"XDG_CONFIG_HOME=/c", "GOFLAGS=-x", "HELMET=keep"})
	if want := []string{"PATH=/bin", "GOFLAGS=-x", "HELMET=keep"}; !slices.Equal(got, want) {
		t.Errorf("helmEnv = %q, want %q", got, want)
	}
}

// TestBinary: the cached helm is Version, assumes the Kubernetes version of
// its client-go when no cluster is asked (the Makefile's stamps), and ignores
// the caller's HELM_* settings.
func TestBinary(t *testing.T) {
	h := New(t)
	out, _, err := h.Run(nil, "version", "--template", "{{.Version}}")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != Version {
		t.Errorf("helm version: %q, want %q", out, Version)
	}

	chart := t.TempDir()
	files := map[string]string{
		"Chart.yaml":           "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"templates/probe.yaml": "kube: {{ .Capabilities.KubeVersion.Version }}\nnamespace: {{ .Release.Namespace }}\n",
	}
	for name, text := range files {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HELM_NAMESPACE", "from-the-environment")
	out, _, err = h.Run(nil, "template", "probe", chart)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kube: v1." + kubeMinor + ".0\n", "namespace: default\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helm template:\n%s\nwant %q", out, want)
		}
	}
}
