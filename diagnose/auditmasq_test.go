package diagnose

import (
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/snatlab"
)

// masqFindings audits the lab's node as the host netns and returns its
// findings about MASQUERADE.
func masqFindings(t *testing.T, l *snatlab.Lab) []Finding {
	t.Helper()
	l.Sandbox(t)
	r := AuditNetNS(l.Node.Inode(), 0, AuditOptions{HostNetNS: l.Node.Inode(), NodePortLo: 30000, NodePortHi: 32767, Warn: 80, Crit: 95, Top: 3, Findings: true})
	var out []Finding
	for _, f := range r.Findings {
		if strings.Contains(f.Message, "MASQUERADE") {
			out = append(out, f)
		}
	}
	return out
}

// TestAuditMasquerade: a MASQUERADE without --to-ports (1024-65535), by
// nft and by iptables-nft, overlaps the NodePort range 30000-32767, and
// with no kube-proxy rule on the node that is a warning with a range clear
// of it; one with --to-ports 40000-40003 is not flagged; a hostPort inside
// the range (a portmap DNAT chain) is named.
func TestAuditMasquerade(t *testing.T) {
	for _, tool := range []string{snatlab.ToolNft, snatlab.ToolIPTables} {
		fs := masqFindings(t, snatlab.New(t, snatlab.Options{Tool: tool, Pods: 1}))
		want := 1
		if tool == snatlab.ToolIPTables {
			want = 2 // iptables-nft and ip6tables-nft
		}
		if len(fs) != want {
			t.Fatalf("%s: findings %+v, want %d", tool, fs, want)
		}
		for _, f := range fs {
			if f.Severity != SevWarning || !strings.Contains(f.Message, "1024-65535 (no --to-ports: the default)") || !strings.Contains(f.Message, "in 2768 ports") || !strings.Contains(f.Message, "32768-60999") {
				t.Errorf("%s: %s %s", tool, f.Severity, f.Message)
			}
		}
	}
	if fs := masqFindings(t, snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40003, Pods: 1})); len(fs) != 0 {
		t.Errorf("--to-ports 40000-40003 flagged: %+v", fs)
	}
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolIPTables, Lo: 40000, Hi: 40100, Pods: 1})
	l.Run(t, l.Node, "iptables-nft", "-t", "nat", "-N", "CNI-DN-lab")
	l.Run(t, l.Node, "iptables-nft", "-t", "nat", "-A", "CNI-DN-lab", "-p", "tcp", "-m", "tcp", "--dport", "40050", "-j", "DNAT", "--to-destination", "10.98.1.2:80")
	fs := masqFindings(t, l)
	if len(fs) != 1 || fs[0].Severity != SevInfo || !strings.Contains(fs[0].Message, "hostPorts tcp/40050") {
		t.Errorf("hostPort in the range: %+v", fs)
	}
}
