package otelcol

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
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
