package diagnose

import (
	"errors"
	"github.com/eaddr/eaddr/diagnose/nodeport"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/netns"
)

// Each fix is checked against the range: a reserve only when it leaves
// usable ports (merged with what is reserved already), else moving the
// range, to a part of it clear of the NodePort range when that is wide
// enough, else the kernel's default; a range it moves to has the node's
// listeners inside it reserved.
func TestNodePortRangeFixes(t *testing.T) {
	const moveDefault = `sysctl -w net.ipv4.ip_local_port_range="32768 60999" (also in /etc/sysctl.d) gives 28232 ports (now 10)`
	for _, tc := range []struct {
		name     string
		lo, hi   int
		reserved string
		served   []int
		want     []string // substrings, one per fix, in order
		not      string   // in no fix
	}{
		{"inside", 30100, 30109, "", nil, []string{`reserving the overlap 30100-30109 would leave no usable port: the range 30100-30109 lies inside the NodePort range 30000-32767: move the range instead: ` + moveDefault}, "ip_local_reserved_ports"},
		{"inside, partly reserved", 30100, 30109, "30100-30104", nil, []string{`reserving the overlap 30100-30109 would leave no usable port: the range 30100-30109 lies inside the NodePort range 30000-32767: move the range instead: sysctl -w net.ipv4.ip_local_port_range="32768 60999" (also in /etc/sysctl.d) gives 28232 ports (now 5)`}, "ip_local_reserved_ports="},
		{"inside, the node listens in the new range", 30100, 30109, "", []int{8080, 35000, 61000}, []string{`move the range instead: sysctl -w net.ipv4.ip_local_port_range="32768 60999" net.ipv4.ip_local_reserved_ports=35000 (also in /etc/sysctl.d) gives 28231 ports (now 10); the reserve keeps the ports the node listens on inside it (35000) from connect() and bind(0)`}, "8080"},
		{"widened", 1024, 65535, "", nil, []string{"reserve the overlap 30000-32767: sysctl -w net.ipv4.ip_local_reserved_ports=30000-32767 (also in /etc/sysctl.d): the list replaces the current one, leaving 61744 ports of 1024-65535 usable",
			`or move the range clear of the NodePort range: sysctl -w net.ipv4.ip_local_port_range="32768 65535" (also in /etc/sysctl.d) gives 32768 ports (now 64512)`}, ""},
		{"reserved already, merged", 20000, 31000, "8080,30500-30600", nil, []string{"ip_local_reserved_ports=8080,30000-31000 (", `ip_local_port_range="20000 29999"`}, ""},
		{"clear", 32768, 60999, "", nil, []string{"no longer hands out ports of the NodePort range"}, "sysctl -w"},
		{"too little left outside", 29500, 32767, "", nil, []string{"ip_local_reserved_ports=30000-32767 (also in /etc/sysctl.d): the list replaces the current one, leaving 500 ports of 29500-32767 usable: few, moving the range is better", `ip_local_port_range="32768 60999"`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := netdiag.ParseReserved(tc.reserved)
			if err != nil {
				t.Fatal(err)
			}
			p := &portScene{sc: portmodel.Sysctls{Lo: tc.lo, Hi: tc.hi}, served: tc.served}
			for _, r := range res {
				p.sc.Reserved = append(p.sc.Reserved, portmodel.Span{Lo: r.Lo, Hi: r.Hi})
			}
			got := nodePortRangeFixes(p, 30000, 32767)
			for i, w := range tc.want {
				if i >= len(got) || !strings.Contains(got[i], w) {
					t.Errorf("fix %d: want %q in %q", i, w, got)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d fixes, want %d: %q", len(got), len(tc.want), got)
			}
			if tc.not != "" && strings.Contains(strings.Join(got, "\n"), tc.not) {
				t.Errorf("%q in %q", tc.not, got)
			}
		})
	}
}

type fakeRules map[uint16]string

// unreadableRules are rules that could not be read, as without CAP_NET_ADMIN.
type unreadableRules struct{}

func (unreadableRules) Find(uint8, netip.Addr, uint16) (string, bool) { return "", false }
func (unreadableRules) Err() error                                    { return errors.New("nftables: operation not permitted") }

func (r fakeRules) Find(proto uint8, _ netip.Addr, port uint16) (string, bool) {
	s, ok := r[port]
	return s, ok && proto == unix.IPPROTO_TCP
}

// A timed-out connect from a NodePort source port in the host netns: the
// reply was likely taken by a NodePort rule, which is named when the rules
// know it; the meaning does not blame the destination; the fix is checked
// against the netns's range. The same failure elsewhere, or from a port
// outside the range, is not diagnosed at all.
func TestNodePortTimeoutDiagnosis(t *testing.T) {
	ns := rangedNS(t, 30100, 30109)
	pid := os.Getpid()
	hold := startIn(t, ns) // a process in the netns, through which it is read
	ev := &decode.Event{Syscall: decode.Connect, Errno: int(unix.ETIMEDOUT), NetNS: uint32(ns.Inode()), PID: uint32(hold), PPID: uint32(pid),
		Remote:        decode.Addr{Valid: true, Family: decode.AFInet, IP: netip.MustParseAddrPort("10.9.0.2:80")},
		Local:         decode.Addr{Valid: true, Family: decode.AFInet, IP: netip.MustParseAddrPort("10.9.0.1:30105")},
		LocalReleased: true}
	diag := func(rules NodePortRules, host uint64, e *decode.Event) *Diagnosis {
		d := NewDiagnoser()
		d.HostNetNS, d.NodePortRules = host, rules
		return d.Diagnose(e)
	}
	for _, tc := range []struct {
		name  string
		rules NodePortRules
		rule  string
	}{
		{"rule found", fakeRules{30105: "Service default/web:http (nftables rule: goto external-X)"}, "the node has a NodePort rule for tcp/30105: Service default/web:http (nftables rule: goto external-X)"},
		{"rule not found", fakeRules{}, "eaddr found no NodePort rule for tcp/30105, so this is likely, not certain"},
		{"rules not readable", unreadableRules{}, "eaddr could not read the node's NodePort rules (nftables: operation not permitted), so this is likely, not certain"},
		{"no rule reader", nil, "eaddr does not read the node's NodePort rules, so this is likely, not certain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := diag(tc.rules, ns.Inode(), ev)
			if g == nil {
				t.Fatal("no diagnosis")
			}
			if !strings.Contains(g.Verdict, "reply (SYN-ACK) to it was likely taken by a NodePort rule") || !strings.Contains(g.Verdict, tc.rule) {
				t.Errorf("verdict %q, want the reply likely taken and %q", g.Verdict, tc.rule)
			}
			if g.Meaning == "" || strings.Contains(g.Meaning, "the destination or the path") {
				t.Errorf("meaning %q", g.Meaning)
			}
			if len(g.Fix) != 1 || !strings.Contains(g.Fix[0], "move the range instead") || g.RangeLo != 30100 || g.Usable != 10 {
				t.Errorf("fix %q range %d-%d usable %d: want the checked fix for 30100-30109", g.Fix, g.RangeLo, g.RangeHi, g.Usable)
			}
		})
	}
	refused := *ev
	refused.Errno = int(unix.ECONNREFUSED)
	if g := diag(nil, ns.Inode(), &refused); g == nil || !strings.Contains(g.Verdict, "this refusal reached the socket, so no NodePort rule took this reply") || g.Meaning != "" {
		t.Errorf("refused: %+v", g)
	}
	outside := *ev
	outside.Local.IP = netip.MustParseAddrPort("10.9.0.1:40000")
	if g := diag(nil, ns.Inode(), &outside); g != nil {
		t.Errorf("port 40000: %+v", g)
	}
	if g := diag(nil, ns.Inode()+1, ev); g != nil {
		t.Errorf("not the host netns: %+v", g)
	}
}

// startIn starts a process that sleeps in ns until the test ends.
func startIn(t *testing.T, ns *netns.NS) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestHitWords: a rule with a Service says it; one without says so, and
// what it matches.
func TestHitWords(t *testing.T) {
	for _, c := range []struct {
		h    nodeport.Hit
		want string
	}{
		{nodeport.Hit{Mode: nodeport.ModeNftables, Service: "default/web:http", Verdict: "goto external-X"}, "Service default/web:http (nftables rule: goto external-X)"},
		{nodeport.Hit{Mode: nodeport.ModeIPVS, Addr: netip.MustParseAddr("192.0.2.1"), Port: 30080, Backend: "192.0.2.3:8080"}, "a rule that names no Service (ipvs virtual service 192.0.2.1:30080, backend 192.0.2.3:8080)"},
		{nodeport.Hit{Mode: nodeport.ModeIPTables}, "a rule that names no Service (iptables)"},
	} {
		if got := hitWords(c.h); got != c.want {
			t.Errorf("hitWords(%+v) = %q, want %q", c.h, got, c.want)
		}
	}
}
