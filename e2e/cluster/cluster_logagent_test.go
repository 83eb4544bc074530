package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/otelcol"
)

// logAgent: the OpenTelemetry Collector with deploy/otelcol/eaddr.yaml
// reads eaddr's container log where the kubelet wrote it
// (/var/log/pods/eaddr_POD_UID/eaddr/N.log, CRI format) and hands on every
// JSON line that `kubectl logs` shows eaddr wrote on stdout, each field
// typed (otelcol.Check).
func (s *stories) logAgent(t *testing.T) {
	out, _, err := s.k.Run(nil, "-n", "eaddr", "logs", s.eaddrPod)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "{") { // kubectl logs mixes in stderr's log lines: time=...
			lines = append(lines, l)
		}
	}
	kinds := map[string]int{} // kind and comm: what the collector was given
	for _, l := range lines {
		var e struct {
			Kind    string
			Process struct{ Comm string }
		}
		json.Unmarshal([]byte(l), &e)
		kinds[e.Kind+" "+e.Process.Comm]++
	}
	if kinds["failure wget"] == 0 {
		t.Fatalf("kubectl logs %s has no failure line to look for:\n%s", s.eaddrPod, lastN(string(out), 20))
	}
	glob := s.c.PodLogsDir + "/eaddr_" + s.eaddrPod + "_*/eaddr/*.log"
	recs := otelcol.Check(t, glob, lines)
	t.Logf("%s: %d records from the collector for the %d stdout lines of kubectl logs (%v)", glob, len(recs), len(lines), kinds)
}
