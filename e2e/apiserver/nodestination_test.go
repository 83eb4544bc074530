package apiserver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The destination label --metrics-no-destination gives the port series
// (pipeline's busiestDestination) is the one the promtool tests fire the
// port alerts on and docs/alerts.md shows.
func TestNoDestinationLabelInStep(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "pipeline", "portbusiest.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const busiestDestination = "([^"]+)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("pipeline/portbusiest.go: no const busiestDestination")
	}
	label := `destination="` + string(m[1]) + `"`
	for _, f := range []string{filepath.Join("testdata", "alerts_test.yaml"), filepath.Join("..", "docs", "alerts.md")} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), label) {
			t.Errorf("%s has no series with %s", f, label)
		}
	}
}
