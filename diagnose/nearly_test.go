package diagnose

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// nearlyScene is a netns with the range 40000-40009 and a listener on
// 127.0.0.1:8080 (outside it) that the test dials from inside: each dial
// holds one of the 10 ports toward that destination.
type nearlyScene struct {
	ns    *netns.NS
	pid   int
	dst   netip.AddrPort
	conns []net.Conn
}

func newNearlyScene(t *testing.T) *nearlyScene {
	t.Helper()
	ns := rangedNS(t, 40000, 40009)
	l, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted = append(accepted, c) // kept open: the server side holds no port of the range
		}
	}()
	s := &nearlyScene{ns: ns, pid: startIn(t, ns), dst: netip.MustParseAddrPort("127.0.0.1:8080")}
	t.Cleanup(func() {
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// dial opens n more connections toward the destination and keeps them.
func (s *nearlyScene) dial(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := s.ns.Dial("tcp4", s.dst.String())
		if err != nil {
			t.Fatalf("dial %d: %v", len(s.conns)+1, err)
		}
		s.conns = append(s.conns, c)
	}
}

// TestNearly: a netns whose connections take 9 of the 10 ports toward one
// destination is nearly exhausted at --warn 80 and 90, with the model's
// counts, the test process as the holder and the fix for its cause; at 95
// it is not (the claim is checked against the netns, not taken from the
// caller). At 7 of 10 it is not at 80. With all 10 taken the verdict is the
// failure's own: exhausted.
func TestNearly(t *testing.T) {
	s := newNearlyScene(t)
	d := NewDiagnoser()
	nearly := func(warn int) *Diagnosis {
		t.Helper()
		g, err := d.Nearly(s.ns.Inode(), s.pid, s.dst, warn)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	s.dial(t, 7)
	if g := nearly(80); g != nil {
		t.Errorf("7 of 10 ports at --warn 80: %q, want no warning", g.Verdict)
	}
	s.dial(t, 2)
	for _, warn := range []int{80, 90} {
		g := nearly(warn)
		if g == nil {
			t.Fatalf("9 of 10 ports at --warn %d: no warning", warn)
		}
		want := "ephemeral ports nearly exhausted toward 127.0.0.1:8080: 9 of the 10 ports of 40000-40009 are taken (90%): 9 held by open connections, held by pid "
		if !strings.HasPrefix(g.Verdict, want) || !strings.HasSuffix(g.Verdict, "; 1 left, then connect() to it fails with EADDRNOTAVAIL") {
			t.Errorf("verdict %q, want it to start %q and say 1 is left", g.Verdict, want)
		}
		self := fmt.Sprintf("pid %d (", os.Getpid())
		if g.Cause != CausePerDestination || g.Exhausted || g.Usable != 10 || g.InUse != 9 || len(g.Holders) != 1 || g.Holders[0].PID != os.Getpid() ||
			len(g.Fix) == 0 || !strings.HasPrefix(g.Fix[0], self) || !strings.Contains(g.Fix[0], "holds 9 connections to this destination") {
			t.Errorf("cause %q exhausted %v usable %d in use %d holders %+v fix %q; want per_destination, 9 of 10, this process holding 9 and its fix",
				g.Cause, g.Exhausted, g.Usable, g.InUse, g.Holders, g.Fix)
		}
	}
	if g := nearly(95); g != nil {
		t.Errorf("9 of 10 ports at --warn 95: %q, want no warning", g.Verdict)
	}
	s.dial(t, 1)
	g := nearly(80)
	if g == nil || !g.Exhausted || !strings.HasPrefix(g.Verdict, "ephemeral ports exhausted toward 127.0.0.1:8080: none of the 10 ports") {
		t.Errorf("10 of 10 ports: %+v, want the exhausted verdict", g)
	}
}
