package output

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
)

// hostileComm writes the operator's clipboard (OSC 52) if it reaches a
// terminal as it is.
const hostileComm = "\x1b]52;c;aGk=\x07"

// culpritReport: a pod's netns whose one destination is exhausted by a
// holder with a hostile comm, beside the host, a netns entered through its
// mount and one that could not be audited.
func culpritReport() diagnose.CheckReport {
	fix := "pid 4242 (" + hostileComm + ") holds 10 connections to this destination: reuse connections (HTTP keep-alive, a connection pool) instead of opening new ones"
	return diagnose.CheckReport{NodePortRange: "30000-32767", Worst: diagnose.SevCritical, NetNS: []diagnose.NetNSReport{
		{Inode: 4026531833, PID: 1, Comm: "systemd", Host: true, PortRange: "32768-60999", Usable: 28232, Worst: diagnose.SevOK},
		{Inode: 4026532173, PID: 812, Comm: "pause", Pod: &diagnose.CheckPod{Name: "web-0", Namespace: "shop", UID: "u-1"},
			PortRange: "40000-40009", Usable: 10, InUse: 10, Worst: diagnose.SevCritical,
			Destinations: []diagnose.Destination{{Remote: "10.96.0.10:443", Ports: 10, Percent: 100, Toward: 10, Tried: 10, Exhausted: true,
				Culprit: diagnose.Culprit{Cause: diagnose.CausePerDestination, Verdict: "ephemeral ports exhausted toward 10.96.0.10:443",
					Holders: []diagnose.CulpritHolder{{PID: 4242, Comm: hostileComm, Sockets: 10, PodUID: "u-1", ContainerID: "c-1",
						Pod: &diagnose.CheckPod{Name: "web-0", Namespace: "shop", UID: "u-1"}}},
					Fix: []string{fix, `widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}] (1024 keeps clear of privileged ports)`}}},
				{Remote: "10.0.0.1:80", Ports: 1, Percent: 10, Toward: 1, Tried: 10}},
			Findings: []diagnose.Finding{{Severity: diagnose.SevCritical, Message: "no port is left toward 10.96.0.10:443: 10 ports (100%) are taken for it, and new connections to it fail with EADDRNOTAVAIL"}}},
		{Inode: 4026532300, Mount: "/run/netns/" + hostileComm, PortRange: "40000-40009", Usable: 10, Worst: diagnose.SevWarning,
			Destinations: []diagnose.Destination{{Remote: "127.0.0.1:8080", Ports: 8, Percent: 80, Toward: 8, Tried: 10,
				Culprit: diagnose.Culprit{Unknown: "below 70% at a second look: the sockets changed since the audit"}}}},
		{Inode: 4026532400, PID: 99, Comm: "sleep", Error: "gone", Worst: diagnose.SevUnknown,
			Findings: []diagnose.Finding{{Severity: diagnose.SevUnknown, Message: "not audited: cannot enter the network namespace: gone"}}},
	}}
}

// The hand-written report reads back, through its json tags, as the report
// it was written from; empty fields are left out, never null.
func TestCheckReportJSON(t *testing.T) {
	full := culpritReport()
	full.NetNS[0].Reserved, full.NetNS[0].UnprivilegedPort, full.NetNS[0].Listeners = "30000-32767", 1024, []string{"0.0.0.0:40000"}
	full.NetNS[0].Findings = []diagnose.Finding{{Severity: diagnose.SevInfo, Message: "a"}}
	b := AppendCheckReport(nil, &full)
	var back diagnose.CheckReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if !reflect.DeepEqual(back, full) {
		t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", back, full, b)
	}
	for _, want := range []string{`"pid":4242,"comm":"\u001b]52;c;aGk=\u0007"`, `"held_toward":10,"held_for_all":0`, `"tried":10,"cause":"per_destination"`,
		`"mount":"/run/netns/\u001b]52;c;aGk=\u0007"`, `"culprit_unknown":"below 70%`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in %s", want, b)
		}
	}
	empty := string(AppendCheckReport(nil, &diagnose.CheckReport{NodePortRange: "1-2", NetNS: []diagnose.NetNSReport{{Inode: 1}}}))
	for _, absent := range []string{"null", "pid", "comm", "mount", "pod", "port_range", "reserved_ports", "usable_ports", "top_destinations", "listeners_in_range", "findings", "error", "unprivileged_port_start"} {
		if strings.Contains(empty, `,"`+absent+`"`) || (absent == "null" && strings.Contains(empty, absent)) {
			t.Errorf("%s in %s", absent, empty)
		}
	}
	if none := string(AppendCheckReport(nil, &diagnose.CheckReport{})); !strings.Contains(none, `"netns":[]`) {
		t.Errorf("no netns: %s, want an empty list", none)
	}
}

// check's table as a person reads it at 120 columns (and at 80): header
// rows that say what each number counts, the critical destination's
// holder (pid, comm, pod) and fixes under it, a quoted value never split,
// no line wider than the terminal, and a hostile comm or mount escaped.
func TestCheckTable(t *testing.T) {
	rep := culpritReport()
	for _, width := range []int{120, 80} {
		lines := CheckLines(&rep, width)
		text := strings.Join(lines, "\n")
		for _, l := range lines {
			if len([]rune(l)) > width { // all of one column each, here
				t.Errorf("at %d columns, a line of %d: %q", width, len([]rune(l)), l)
			}
		}
		if strings.ContainsAny(text, "\x1b\x07") {
			t.Errorf("at %d columns, an escape reached the table:\n%s", width, text)
		}
		for _, want := range []string{
			"NETNS", "STATUS", "HELD-FOR-ALL", "DESTINATION", "TOWARD-DEST", "TAKEN", "TRIED",
			"shop/web-0", "CRITICAL", "netns 4026532173, entered through pid 812 (pause)\n  its sockets: nsenter -t 812 -n ss -tanp",
			`held by: pid 4242 (\x1b]52;c;aGk=\x07) in pod shop/web-0 with 10 sockets`,
			`fix: pid 4242 (\x1b]52;c;aGk=\x07) holds 10 connections`, `"1024 65535"}]`,
			`netns \x1b]52;c;`, `/run/netns/\x1b]52;c;aGk=\x07`, `its sockets: ip netns exec \x1b]52;c;aGk=\x07 ss -tanp`,
			"holders and fix not known: below 70% at a second look", "UNKNOWN   not audited", "worst: CRITICAL",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("at %d columns, no %q in\n%s", width, want, text)
			}
		}
		if strings.Contains(text, "entered through pid 1 ") || strings.Contains(text, "systemd") {
			t.Errorf("the host names a process as if it meant something:\n%s", text)
		}
	}
	t.Logf("at 120 columns:\n%s", strings.Join(CheckLines(&rep, 120), "\n"))
}
