package output

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
)

// The hand-written report reads back, through its json tags, as the report
// it was written from; empty fields are left out, never null.
func TestCheckReportJSON(t *testing.T) {
	full := diagnose.CheckReport{NodePortRange: "30000-32767", Worst: diagnose.SevCritical, NetNS: []diagnose.NetNSReport{
		{Inode: 4026531840, PID: 1, Comm: "systemd \"x\"", Host: true, PortRange: "32768-60999", Reserved: "30000-32767",
			UnprivilegedPort: 1024, Usable: 28232, InUse: 3, Destinations: []diagnose.Destination{{Remote: "10.0.0.1:80", Ports: 3}},
			Listeners: []string{"0.0.0.0:40000"}, Findings: []diagnose.Finding{{Severity: diagnose.SevInfo, Message: "a"}, {Severity: diagnose.SevCritical, Message: "b"}}, Worst: diagnose.SevCritical},
		{Inode: 4026532100, PID: 42, Pod: &diagnose.CheckPod{Name: "p", Namespace: "n", UID: "u"}, Error: "gone"},
	}}
	b := AppendCheckReport(nil, &full)
	var back diagnose.CheckReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !reflect.DeepEqual(back, full) {
		t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", back, full, b)
	}
	empty := string(AppendCheckReport(nil, &diagnose.CheckReport{NodePortRange: "1-2", NetNS: []diagnose.NetNSReport{{Inode: 1}}}))
	for _, absent := range []string{"null", "comm", "pod", "port_range", "reserved_ports", "usable_ports", "top_destinations", "listeners_in_range", "findings", "error", "unprivileged_port_start"} {
		if strings.Contains(empty, `,"`+absent+`"`) || (absent == "null" && strings.Contains(empty, absent)) {
			t.Errorf("%s in %s", absent, empty)
		}
	}
	if none := string(AppendCheckReport(nil, &diagnose.CheckReport{})); !strings.Contains(none, `"netns":[]`) {
		t.Errorf("no netns: %s, want an empty list", none)
	}
}
