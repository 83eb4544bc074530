package top

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// budget is a SNAT budget from 198.18.0.1 toward dst of entries in the
// range lo-hi (rule: a rule's range; "": the default), held by holders.
func budget(dst string, entries, lo, hi int, rule string, holders ...diagnose.SNATHolder) diagnose.SNATBudget {
	return diagnose.SNATBudget{Proto: unix.IPPROTO_TCP, Egress: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddrPort(dst),
		Entries: entries, Lo: lo, Hi: hi, Rule: rule, Holders: holders}
}

func holder(addr string, entries int, pod *decode.Pod) diagnose.SNATHolder {
	return diagnose.SNATHolder{Addr: netip.MustParseAddr(addr), Entries: entries, Pod: pod}
}

// nodeSample is a sample of one quiet netns with the node's budgets read
// by a fake reader returning nb and err, through the Sampler.
func nodeSample(t *testing.T, nb *diagnose.NodeBudgets, err error) Sample {
	t.Helper()
	calls := 0
	s := &Sampler{Audit: func() ([]diagnose.NetNSReport, error) {
		return []diagnose.NetNSReport{report(1, "10.0.0.1:80", 1, 1000)}, nil
	}, NodeBudgets: func() (*diagnose.NodeBudgets, error) { calls++; return nb, err }, NoFailuresWhy: "test",
		Now: func() time.Time { return t0 }}
	smp, e := s.Sample()
	if e != nil || calls != 1 {
		t.Fatalf("sample: %v, %d reads of the budgets, want 1", e, calls)
	}
	return smp
}

// lab is the SNAT lab's node as ReadNodeBudgets reads it: toward
// 198.18.0.2:8080, 4 entries of the rule's 4 ports, pod 10.98.1.2 (named
// web) 3 and 10.98.2.2 (no pod known) 1; toward 198.18.0.3:443, 39 of
// 100 (below 40%: no row); toward 198.18.0.4:53 over UDP, 40 of 100 (a
// row, no details below 80%); conntrack 10 of 1000.
func lab() *diagnose.NodeBudgets {
	web := &decode.Pod{Namespace: "default", Name: "web", UID: "u1"}
	return &diagnose.NodeBudgets{
		SNAT: []diagnose.SNATBudget{
			budget("198.18.0.3:443", 39, 30000, 30099, "nft table ip nat chain post", holder("10.98.3.2", 39, nil)),
			func() diagnose.SNATBudget {
				b := budget("198.18.0.4:53", 40, 30000, 30099, "nft table ip nat chain post", holder("10.98.4.2", 40, nil))
				b.Proto = unix.IPPROTO_UDP
				return b
			}(),
			budget("198.18.0.2:8080", 4, 40000, 40003, "nft table inet eaddr_lab chain post", holder("10.98.1.2", 3, web), holder("10.98.2.2", 1, nil)),
		},
		Conntrack: &diagnose.ConntrackUse{Count: 10, Max: 1000},
	}
}

// The node's SNAT rows: the fullest first, only those at half of --warn
// or more, each with N/M, the bar, the range and its top holder by pod
// and address (or the address alone, never a guessed pod); under the one
// at --warn its holders and fix; the conntrack line after them; all above
// the netns rows.
func TestNodeRows(t *testing.T) {
	m := NewModel()
	m.Add(nodeSample(t, lab(), nil))
	lines := m.Table(Header{Width: 120})
	text := strings.Join(lines, "\n")
	t.Logf("at 120 columns:\n%s", text)
	for _, want := range []string{
		"node: SNAT toward a destination or conntrack at 40% or more (half of --warn 80)",
		"198.18.0.1 -> 198.18.0.2:8080  tcp    4/4            [##########] 100%  40000-40003  default/web (10.98.1.2): 3",
		"198.18.0.1 -> 198.18.0.4:53    udp    40/100         [####......]  40%  30000-30099  10.98.4.2: 40",
		"  entries by source: default/web (10.98.1.2) 3, 10.98.2.2 1",
		"  fix: widen the MASQUERADE range (40000-40003, 4 ports;",
		"conntrack: 10 of 1000 entries (1%;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q", want)
		}
	}
	if strings.Contains(text, "198.18.0.3") || strings.Count(text, "entries by source") != 1 {
		t.Errorf("a row below 40%% shown, or details under a row below --warn")
	}
	if i, j, k := strings.Index(text, "198.18.0.2:8080"), strings.Index(text, "198.18.0.4:53"), strings.Index(text, "NETNS"); !(i < j && j < k) {
		t.Errorf("want the fullest first, the node above the netns")
	}
}

// The live view has the details under the first SNAT row at --warn only,
// so that the rows come first; --once and a pipe under each.
func TestNodeRowsFirstDetails(t *testing.T) {
	nb := lab()
	nb.SNAT = append(nb.SNAT, budget("198.18.0.5:80", 10, 30000, 30009, "r", holder("10.98.5.2", 10, nil)))
	m := NewModel()
	m.Add(nodeSample(t, nb, nil))
	for first, want := range map[bool]int{true: 1, false: 2} {
		if text := strings.Join(m.Table(Header{Width: 120, FirstDetails: first}), "\n"); strings.Count(text, "entries by source:") != want {
			t.Errorf("FirstDetails %v: want %d details:\n%s", first, want, text)
		}
	}
}

// --warn moves the mark: at --warn 100 the rows show from 50%, so the
// UDP row at 40% is gone and the one at 100% stays.
func TestNodeRowsFollowWarn(t *testing.T) {
	m := NewModel()
	m.Warn = 100
	m.Add(nodeSample(t, lab(), nil))
	text := strings.Join(m.Table(Header{Width: 120}), "\n")
	if !strings.Contains(text, "at 50% or more (half of --warn 100)") || strings.Contains(text, "198.18.0.4:53") || !strings.Contains(text, "198.18.0.2:8080") {
		t.Errorf("--warn 100:\n%s", text)
	}
}

// Nothing at a notable share: no node lines at all; the conntrack table
// alone at it: its line without a SNAT table.
func TestNodeQuietAndConntrackAlone(t *testing.T) {
	quiet := &diagnose.NodeBudgets{SNAT: []diagnose.SNATBudget{budget("198.18.0.2:80", 10, 1024, 65535, "")},
		Conntrack: &diagnose.ConntrackUse{Count: 399, Max: 1000}}
	m := NewModel()
	m.Add(nodeSample(t, quiet, nil))
	if text := strings.Join(m.Table(Header{Width: 120}), "\n"); strings.Contains(text, "node") || strings.Contains(text, "conntrack") {
		t.Errorf("nothing notable, yet:\n%s", text)
	}
	quiet.Conntrack.Count = 400
	m.Add(nodeSample(t, quiet, nil))
	text := strings.Join(m.Table(Header{Width: 120}), "\n")
	if !strings.Contains(text, "conntrack: 400 of 1000 entries (40%;") || strings.Contains(text, "NODE SNAT") {
		t.Errorf("conntrack at 40%%:\n%s", text)
	}
}

// hostilePod is a pod name that writes the clipboard if printed as is.
var hostilePod = &decode.Pod{Namespace: "ns\x1b[2J", Name: "p" + hostileComm + strings.Repeat("x", 200), UID: "u"}

// A hostile pod name is escaped, and no line passes the width, whether
// the name is in the row (cut) or in the details (wrapped).
func TestNodeRowsWidthAndHostileNames(t *testing.T) {
	nb := &diagnose.NodeBudgets{SNAT: []diagnose.SNATBudget{
		budget("[fd00:ea::2]:8080", 4, 40000, 40003, "r", holder("fd00:ea:1::2", 4, hostilePod)),
		budget("198.18.0.9:80", 50, 30000, 30099, "r", holder("10.98.9.2", 50, hostilePod))}}
	nb.SNAT[0].Egress = netip.MustParseAddr("fd00:ea::1")
	m := NewModel()
	m.Add(nodeSample(t, nb, nil))
	for _, width := range []int{120, 80} {
		lines := m.Table(Header{Width: width})
		text := strings.Join(lines, "\n")
		for _, l := range lines {
			if n := len([]rune(l)); n > width {
				t.Errorf("at %d columns, a line of %d: %q", width, n, l)
			}
		}
		if strings.ContainsAny(text, "\x1b\x07") || !strings.Contains(text, `ns\x1b[2J/p\x1b]52;c;aGk=\x07xx`) {
			t.Errorf("at %d columns, the name not escaped:\n%s", width, text)
		}
		if !strings.Contains(text, "fd00:ea::1 -> [fd00:ea::2]:8080") || !strings.Contains(text, "conntrack: - (its use could not be read)") {
			t.Errorf("at %d columns, the address cut or the conntrack's unknown not said:\n%s", width, text)
		}
	}
}

// What cannot be read is said once, in the header, with the reader's
// error; the JSON says it too, with no SNAT rows and no numbers. Entries
// past the destinations one read counts are said too.
func TestNodeUnreadable(t *testing.T) {
	eperm := errors.New("conntrack table: operation not permitted (the kernel allows conntrack's table and the nftables rules to CAP_NET_ADMIN alone: docs/kubernetes.md)")
	for _, tc := range []struct {
		name string
		nb   *diagnose.NodeBudgets
		want string
	}{
		{"no netns", nil, "node SNAT and conntrack: - (not read: conntrack table: operation not permitted"},
		{"no SNAT", &diagnose.NodeBudgets{Conntrack: &diagnose.ConntrackUse{Count: 1, Max: 10}}, "node SNAT: - (not read: conntrack table: operation not permitted"},
	} {
		m := NewModel()
		m.Add(nodeSample(t, tc.nb, eperm))
		text := strings.Join(m.Table(Header{Width: 120}), "\n")
		if !strings.Contains(text, tc.want) || strings.Count(text, "not permitted") != 1 {
			t.Errorf("%s: want %q once in\n%s", tc.name, tc.want, text)
		}
		snap, b := snapshotOf(t, m)
		if snap.Node == nil || !strings.Contains(snap.Node.SNATUnknown, "not permitted") ||
			len(snap.Node.SNAT) != 0 || (tc.nb == nil) != (snap.Node.ConntrackEntries == nil) {
			t.Errorf("%s: JSON %s", tc.name, b)
		}
	}
	m := NewModel()
	m.Add(nodeSample(t, &diagnose.NodeBudgets{Conntrack: &diagnose.ConntrackUse{Count: 1, Max: 10}, Dropped: 7}, nil))
	if text := strings.Join(m.Table(Header{Width: 120}), "\n"); !strings.Contains(text, "node SNAT: 7 entries toward destinations past the 4096") {
		t.Errorf("entries not counted, not said:\n%s", text)
	}
	if snap, b := snapshotOf(t, m); snap.Node.SNATNotCounted != 7 {
		t.Errorf("JSON %s, want snat_not_counted 7", b)
	}
	m = NewModel()
	m.Add(Sample{At: t0, NetNS: []diagnose.NetNSReport{report(1, "10.0.0.1:80", 1, 1000)}})
	if b, _ := m.JSON(0); strings.Contains(string(b), `"node"`) {
		t.Errorf("budgets not asked, yet %s", b)
	}
}

// The JSON has the table's SNAT rows whole (the pod, the range, the
// rule), the mark they show from and the conntrack table's use.
func TestNodeJSON(t *testing.T) {
	m := NewModel()
	m.Add(nodeSample(t, lab(), nil))
	snap, b := snapshotOf(t, m)
	n := snap.Node
	if n == nil || n.ShownAtPercent != 40 || len(n.SNAT) != 2 || *n.ConntrackEntries != 10 || *n.ConntrackMax != 1000 || *n.ConntrackPercent != 1 {
		t.Fatalf("node %s", b)
	}
	s := n.SNAT[0]
	if s.Destination != "198.18.0.2:8080" || s.Protocol != "tcp" || s.Entries != 4 || s.Ports != 4 || s.Percent != 100 || s.RangeLo != 40000 ||
		s.Rule != "nft table inet eaddr_lab chain post" || len(s.Holders) != 2 || s.Holders[0].Pod == nil || s.Holders[0].Pod.Name != "web" ||
		s.Holders[1].Address != "10.98.2.2" || s.Holders[1].Pod != nil || n.SNAT[1].Protocol != "udp" {
		t.Errorf("rows %s", b)
	}
}

// snapshotOf is m's JSON, read back, and as printed.
func snapshotOf(t *testing.T, m *Model) (Snapshot, []byte) {
	t.Helper()
	b, err := m.JSON(0)
	if err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	return snap, b
}
