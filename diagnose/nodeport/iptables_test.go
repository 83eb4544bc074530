package nodeport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// writeFile writes s to a file of the test's temporary directory.
func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIPTablesNftNodePorts: chain KUBE-NODEPORTS of table nat written by
// iptables-nft the way kube-proxy's iptables proxier writes it, IPv4 and
// IPv6: the comment names the Service port; a rule with an inverted port is
// counted as not understood, not guessed; nothing of it shows up in another
// netns.
func TestIPTablesNftNodePorts(t *testing.T) {
	ipt := testenv.Program(t, "iptables-nft", "iptables")
	ip6t := testenv.Program(t, "ip6tables-nft", "iptables")
	ns := testns.New(t)
	for _, args := range [][]string{
		{"-t", "nat", "-N", "KUBE-NODEPORTS"},
		{"-t", "nat", "-N", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/web:http", "-m", "tcp", "-p", "tcp", "--dport", "30080", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "kube-system/dns:dns", "-m", "udp", "-p", "udp", "--dport", "30053", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "tcp", "-p", "tcp", "--dport", "30070", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/odd:x", "-m", "tcp", "-p", "tcp", "!", "--dport", "30099", "-j", "KUBE-EXT-WEB"},
		// more forms iptables-nft writes: another match before the port; the
		// source and destination ports in one comparison; a port range and an
		// xt multiport match, which are no single port (not understood)
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/flags:x", "-p", "tcp", "-m", "tcp", "--dport", "30084", "--tcp-flags", "SYN", "SYN", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/both:x", "-p", "udp", "-m", "udp", "--sport", "5", "--dport", "30055", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-p", "tcp", "-m", "tcp", "--dport", "30085:30089", "-j", "KUBE-EXT-WEB"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-p", "tcp", "-m", "multiport", "--dports", "30086,30087", "-j", "KUBE-EXT-WEB"},
	} {
		run(t, ns, ipt, args...)
	}
	for _, args := range [][]string{
		{"-t", "nat", "-N", "KUBE-NODEPORTS"},
		{"-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/web6:https", "-m", "tcp", "-p", "tcp", "--dport", "30443", "-j", "DNAT", "--to-destination", "[2001:db8::1]:443"},
	} {
		run(t, ns, ip6t, args...)
	}
	// a chain of the same name in another table is not a NodePort rule
	run(t, ns, ipt, "-t", "filter", "-N", "KUBE-NODEPORTS")
	run(t, ns, ipt, "-t", "filter", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/filter:x", "-m", "tcp", "-p", "tcp", "--dport", "30100", "-j", "ACCEPT")

	tab := readIn(t, ns)
	if s := source(t, tab, ModeIPTables); s.Err != nil || s.Entries != 6 || s.Skipped != 3 {
		t.Errorf("iptables source %+v, want 6 entries, 3 not understood, no error", s)
	}
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	wantHit(t, tab, tcp, 30080, Hit{Mode: ModeIPTables, Service: "eaddr-test/web:http", Port: 30080, Proto: tcp, Verdict: "jump KUBE-EXT-WEB"})
	wantHit(t, tab, udp, 30053, Hit{Mode: ModeIPTables, Service: "kube-system/dns:dns", Port: 30053, Proto: udp, Verdict: "jump KUBE-EXT-WEB"})
	wantHit(t, tab, tcp, 30070, Hit{Mode: ModeIPTables, Port: 30070, Proto: tcp, Verdict: "jump KUBE-EXT-WEB"})
	wantHit(t, tab, tcp, 30443, Hit{Mode: ModeIPTables, Service: "eaddr-test/web6:https", Port: 30443, Proto: tcp, Verdict: "target DNAT"})
	wantHit(t, tab, tcp, 30084, Hit{Mode: ModeIPTables, Service: "eaddr-test/flags:x", Port: 30084, Proto: tcp, Verdict: "jump KUBE-EXT-WEB"})
	wantHit(t, tab, udp, 30055, Hit{Mode: ModeIPTables, Service: "eaddr-test/both:x", Port: 30055, Proto: udp, Verdict: "jump KUBE-EXT-WEB"})
	wantMiss(t, tab, tcp, 30085) // in the range: not one port, not guessed
	wantMiss(t, tab, tcp, 30086) // multiport
	wantMiss(t, tab, tcp, 30099) // inverted: not this port
	wantMiss(t, tab, tcp, 30100) // table filter
	wantMiss(t, tab, tcp, 30081)
	wantMiss(t, tab, udp, 30080)

	other := readIn(t, testns.New(t))
	if s := source(t, other, ModeIPTables); s.Err != nil || s.Entries != 0 {
		t.Errorf("iptables source of another netns %+v, want read, 0 entries", s)
	}
	wantMiss(t, other, tcp, 30080)
}

// TestIPTablesLegacyNotDecoded: kube-proxy's rule written by
// iptables-legacy (x_tables) is not decoded: Read says so in the source
// iptables-legacy and Find does not guess.
func TestIPTablesLegacyNotDecoded(t *testing.T) {
	ipt := testenv.Program(t, "iptables-legacy", "iptables")
	ns := testns.New(t)
	empty := readIn(t, ns)
	if s := source(t, empty, SourceLegacy); s.Err != nil {
		t.Errorf("legacy source of a netns without legacy rules: %v, want nil", s.Err)
	}
	run(t, ns, ipt, "-t", "nat", "-N", "KUBE-NODEPORTS")
	run(t, ns, ipt, "-t", "nat", "-A", "KUBE-NODEPORTS", "-m", "comment", "--comment", "eaddr-test/web:http", "-m", "tcp", "-p", "tcp", "--dport", "30080", "-j", "ACCEPT")
	tab := readIn(t, ns)
	s := source(t, tab, SourceLegacy)
	if s.Err == nil || !strings.Contains(s.Err.Error(), "not decoded") {
		t.Errorf("legacy source %+v, want an error saying its rules are not decoded", s)
	}
	wantMiss(t, tab, unix.IPPROTO_TCP, 30080)
}
