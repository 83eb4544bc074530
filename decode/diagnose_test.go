package decode

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode/netdiag"
)

func TestDiagnosisStrings(t *testing.T) {
	c := sortedCounts(map[string]int{"TIME_WAIT": 3, "ESTABLISHED": 5, "CLOSE": 3})
	if got := countsString(c); got != "5 ESTABLISHED, 3 CLOSE, 3 TIME_WAIT" {
		t.Errorf("counts %q", got)
	}
	if got := countsString(nil); got != "no sockets" {
		t.Errorf("no counts %q", got)
	}
	if got := holdersString([]Holder{{PID: 812, Comm: "python3", Sockets: 2}, {PID: 9, Comm: "java"}}); got != ", held by pid 812 python3, pid 9 java" {
		t.Errorf("holders %q", got)
	}
	if got := netdiag.FormatSpans([]netdiag.PortSpan{{Lo: 30000, Hi: 32767}, {Lo: 8080, Hi: 8080}}); got != "30000-32767,8080" {
		t.Errorf("spans %q", got)
	}
}

func TestDiagnosisJSON(t *testing.T) {
	g := &Diagnosis{Verdict: `exhausted "quoted"`, RangeLo: 40000, RangeHi: 40001, Usable: 2, InUse: 2, Reserved: "40001",
		States: []Count{{"ESTABLISHED", 2}}, Holders: []Holder{{PID: 1, Comm: "a\x01b", Sockets: 2}},
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
	if d["verdict"] != `exhausted "quoted"` || d["port_range"] != "40000-40001" || d["in_use"] != 2.0 || d["host_network"] != true || d["reserved_ports"] != "40001" {
		t.Errorf("diagnosis JSON %s", b)
	}
	if got := AppendDiagnosisJSON(nil, nil); len(got) != 0 {
		t.Errorf("nil diagnosis appended %q", got)
	}
}

// Events inside one interval share a snapshot, per netns and destination;
// a netns with no live process is reported as unreachable, once per interval.
func TestDiagnoserRateLimit(t *testing.T) {
	d := NewDiagnoser()
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	dst := netip.MustParseAddrPort("10.96.0.10:80")
	ev := &Event{Syscall: Connect, Errno: EADDRNOTAVAIL, NetNS: 1, PID: 1 << 30, PPID: 1 << 30,
		Remote: Addr{Valid: true, Family: AFInet, IP: dst}}
	for range 1000 {
		g := d.Diagnose(ev)
		if g == nil || !strings.HasPrefix(g.Verdict, "no diagnosis") {
			t.Fatalf("unreachable netns: %+v", g)
		}
	}
	if d.Unreachable != 1 || d.Shared != 999 || d.Snapshots != 0 {
		t.Errorf("unreachable %d shared %d snapshots %d, want 1, 999, 0", d.Unreachable, d.Shared, d.Snapshots)
	}
	other := *ev
	other.Remote.IP = netip.MustParseAddrPort("10.96.0.11:80")
	d.Diagnose(&other) // another destination: its own snapshot
	now = now.Add(1100 * time.Millisecond)
	d.Diagnose(ev) // a new interval
	if d.Unreachable != 3 {
		t.Errorf("unreachable %d, want 3", d.Unreachable)
	}
	if g := d.Diagnose(&Event{Syscall: Connect, Errno: 111}); g != nil {
		t.Errorf("ECONNREFUSED diagnosed: %+v", g)
	}
}
