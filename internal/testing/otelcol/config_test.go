package otelcol

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// docBlock matches the fenced yaml block of docs/log-pipelines.md that
// starts with the config's first line.
var docBlock = regexp.MustCompile("(?s)```yaml\n(# OpenTelemetry Collector.*?)```")

// docs/log-pipelines.md shows deploy/otelcol/eaddr.yaml, the config the
// tests run, byte for byte.
func TestConfigIsDocumented(t *testing.T) {
	cfg, err := os.ReadFile(ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	docPath := filepath.Join(filepath.Dir(ConfigPath()), "..", "..", "docs", "log-pipelines.md")
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	m := docBlock.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no ```yaml block starting with %q", docPath, "# OpenTelemetry Collector")
	}
	if string(m[1]) != string(cfg) {
		t.Errorf("the collector config in %s is not %s; copy it again", docPath, ConfigPath())
	}
}

// defaultInclude finds the include glob's default in the config.
var defaultInclude = regexp.MustCompile(`\$\{env:` + IncludeEnv + `:-([^}]+)\}`)

// The default include glob matches the log of deploy/base's DaemonSet pods
// (their namespace, a pod of the DaemonSet's name, its container), and no
// other container's, which the json_parser would fail on.
func TestDefaultIncludeFitsDaemonSet(t *testing.T) {
	cfg, err := os.ReadFile(ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	m := defaultInclude.FindSubmatch(cfg)
	if m == nil {
		t.Fatalf("%s: no ${env:%s:-...} include", ConfigPath(), IncludeEnv)
	}
	glob := string(m[1])
	ds := daemonSet(t)
	const uid = "0c4e5a7e-2f6d-4d0e-9d56-1a6a2f3b9c11"
	pod := "/var/log/pods/" + ds.Metadata.Namespace + "_" + ds.Metadata.Name + "-x7k2p_" + uid + "/"
	for path, want := range map[string]bool{
		pod + ds.Spec.Template.Spec.Containers[0].Name + "/0.log": true,
		pod + ds.Spec.Template.Spec.Containers[0].Name + "/3.log": true,
		pod + "sidecar/0.log": false,
		"/var/log/pods/kube-system_coredns-5d78c9869d-abcde_" + uid + "/coredns/0.log":    false,
		"/var/log/pods/" + ds.Metadata.Namespace + "_other-x7k2p_" + uid + "/eaddr/0.log": false,
	} {
		if ok, err := filepath.Match(glob, path); err != nil || ok != want {
			t.Errorf("include %s matches %s: %v (%v), want %v", glob, path, ok, err, want)
		}
	}
	if len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("the DaemonSet has %d containers; the include glob reads one", len(ds.Spec.Template.Spec.Containers))
	}
}

// daemonSetManifest is the part of deploy/base/daemonset.yaml's DaemonSet
// that names its pods' log directories.
type daemonSetManifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name string `json:"name"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func daemonSet(t *testing.T) daemonSetManifest {
	t.Helper()
	path := filepath.Join(filepath.Dir(ConfigPath()), "..", "base", "daemonset.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var ds daemonSetManifest
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ds.Kind == "DaemonSet" {
			return ds
		}
	}
	t.Fatalf("%s: no DaemonSet", path)
	return daemonSetManifest{}
}
