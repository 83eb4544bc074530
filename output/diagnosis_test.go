package output

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

func TestDiagnosisJSON(t *testing.T) {
	g := &diagnose.Diagnosis{Verdict: `exhausted "quoted"`, RangeLo: 40000, RangeHi: 40001, Usable: 2, InUse: 2, Reserved: "40001",
		Counted: true, Exhausted: true, HeldAll: 1, Cause: diagnose.CausePerDestination, Source: "iterator",
		States: []diagnose.Count{{State: "ESTABLISHED", N: 2}}, Holders: []diagnose.Holder{{PID: 1, Comm: "a\x01b", Sockets: 2}},
		Addresses: []string{"127.0.0.1/8"}, Fix: []string{"x"}, HostNetwork: true, Shared: true, At: time.Unix(0, 0)}
	b := append([]byte("{\"x\":1"), AppendDiagnosisJSON(nil, g)...)
	b = append(b, '}')
	var m struct {
		Diagnosis map[string]any `json:"diagnosis"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	d := m.Diagnosis
	if d["verdict"] != `exhausted "quoted"` || d["port_range"] != "40000-40001" || d["in_use"] != 2.0 || d["host_network"] != true || d["reserved_ports"] != "40001" ||
		d["cause"] != "per_destination" || d["free"] != 0.0 || d["held_for_all"] != 1.0 || d["exhausted"] != true || d["sockets_from"] != "iterator" {
		t.Errorf("diagnosis JSON %s", b)
	}
	g.Counted = false // a bind() to a given port: a range, no budget
	if b := AppendDiagnosisJSON(nil, g); json.Valid(append(append([]byte("{\"x\":1"), b...), '}')) && strings.Contains(string(b), "usable_ports") {
		t.Errorf("a diagnosis without a budget renders one: %s", b)
	}
	if got := AppendDiagnosisJSON(nil, nil); len(got) != 0 {
		t.Errorf("nil diagnosis appended %q", got)
	}
}
