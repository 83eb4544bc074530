package nodeport

import (
	"net/netip"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/snatlab"
)

func doIn(t *testing.T, ns *netns.NS, fn func() error) {
	t.Helper()
	if err := ns.Do(fn); err != nil {
		t.Fatal(err)
	}
}

// TestMasqueradeRules: the lab's MASQUERADE, written by nft and by
// iptables-nft (IPv4 and IPv6), with and without a port range and
// --random-fully, read back over netlink as written.
func TestMasqueradeRules(t *testing.T) {
	for _, c := range []struct {
		tool   string
		lo, hi int
		want   int // rules
	}{{snatlab.ToolNft, 40000, 40003, 1}, {snatlab.ToolNft, 0, 0, 1}, {snatlab.ToolIPTables, 40000, 40003, 4}, {snatlab.ToolIPTables, 0, 0, 2}} {
		l := snatlab.New(t, snatlab.Options{Tool: c.tool, Lo: c.lo, Hi: c.hi, Pods: 1})
		var got []Masquerade
		doIn(t, l.Node, func() (err error) { got, err = ReadMasquerade(); return err })
		if len(got) != c.want {
			t.Errorf("%s %d-%d: %d rules %+v, want %d", c.tool, c.lo, c.hi, len(got), got, c.want)
			continue
		}
		for _, m := range got {
			if lo, hi := m.Ports(); c.hi != 0 && (lo != c.lo || hi != c.hi) || c.hi == 0 && (lo != 1024 || hi != 65535) || m.RandomFully {
				t.Errorf("%s %d-%d: read %+v", c.tool, c.lo, c.hi, m)
			}
		}
	}
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolIPTables, Pods: 1})
	l.Run(t, l.Node, "iptables-nft", "-t", "nat", "-I", "POSTROUTING", "-p", "tcp", "-j", "MASQUERADE", "--to-ports", "50000-50010", "--random-fully")
	var got []Masquerade
	doIn(t, l.Node, func() (err error) { got, err = ReadMasquerade(); return err })
	if len(got) != 3 || !got[0].RandomFully || got[0].Lo != 50000 || got[0].Hi != 50010 || got[1].RandomFully {
		t.Errorf("with --random-fully: %+v", got)
	}
}

// TestCountSNAT: four connections of pod 0 and one of pod 1 through the
// node's SNAT (and two of pod 1 over IPv6, and one of the node's own): five entries toward the server from the node's address,
// four of them pod 0's; and the per-CPU counters and the table's use.
func TestCountSNAT(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40009})
	l.Hold(t, 0, 4, 4)
	l.Hold(t, 1, 1, 4)
	l.Hold(t, 1, 2, 6)
	ln, err := l.Node.Listen("tcp4", "127.0.0.1:9") // an entry of the node's own: not SNATed
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := l.Node.Dial("tcp4", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s *SNATCount
	var cnt, max uint64
	var ctr ConntrackCounters
	doIn(t, l.Node, func() (err error) {
		if s, err = CountSNAT(100, nil); err != nil {
			return err
		}
		if ctr, err = ReadConntrackCounters(); err != nil {
			return err
		}
		cnt, max, err = ConntrackUse()
		return err
	})
	k := SNATKey{Proto: 6, Egress: snatlab.NodeAddr(4), Dst: netip.AddrPortFrom(snatlab.ServerAddr(4), snatlab.Port)}
	k6 := SNATKey{Proto: 6, Egress: snatlab.NodeAddr(6), Dst: netip.AddrPortFrom(snatlab.ServerAddr(6), snatlab.Port)}
	if s.Entries != 8 || s.SNAT != 7 || len(s.ByKey) != 2 || s.ByKey[k] != 5 || s.ByKey[k6] != 2 || s.BySource[SNATSource{k, snatlab.PodAddr(0, 4)}] != 4 || s.BySource[SNATSource{k6, snatlab.PodAddr(1, 6)}] != 2 {
		t.Errorf("counted %+v", s)
	}
	if cnt != 8 || max == 0 || ctr.CPUs == 0 {
		t.Errorf("use %d of %d, counters %+v; want 8 entries, a max, some CPUs", cnt, max, ctr)
	}
}
