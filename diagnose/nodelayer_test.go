package diagnose

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/connwait"
	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/tracer"
)

// watchDrops loads the node drop program and feeds a DropBook from it
// until the test ends.
func watchDrops(t *testing.T, l *snatlab.Lab) *DropBook {
	t.Helper()
	nd, err := tracer.NewNodeDrops(tracer.NodeDropOptions{})
	if err != nil {
		t.Fatalf("NewNodeDrops: %+v", err)
	}
	b := NewDropBook(1024)
	b.Ksyms = &netdiagKsyms
	b.Drained = nd.Drained
	clock := decode.NewBootClock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var r tracer.NodeDropRecord
		for nd.Read(&r) == nil {
			b.Add(decode.DecodeNodeDrop(&r, nd.ReasonName, clock))
		}
	}()
	t.Cleanup(func() { nd.Close(); <-done; b.Close() })
	if err := b.Watch(uint32(l.Node.Inode())); err != nil {
		t.Fatalf("reading the node's counters: %v", err)
	}
	return b
}

// timeout connects from ns to dst without blocking, as curl does, and
// waits for the socket's error (ETIMEDOUT after tcp_syn_retries=1: about
// 3 s); the event is what eaddr's asynchronous path reports.
func timeout(t *testing.T, ns *netns.NS, dst netip.AddrPort) *decode.Event {
	t.Helper()
	ev := &decode.Event{Syscall: decode.Connect, Protocol: unix.IPPROTO_TCP, Async: true, NetNS: uint32(ns.Inode())}
	start := time.Now()
	err := ns.Do(func() error {
		fam := unix.AF_INET6
		var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
		if dst.Addr().Is4() {
			fam, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
		}
		fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, sa); !errors.Is(err, unix.EINPROGRESS) {
			return err
		}
		local, _ := unix.Getsockname(fd)
		ev.Local = decode.Addr{Valid: true, Family: uint16(fam), IP: addrPortOf(local)}
		var errno unix.Errno
		if err := connwait.Outcome(fd, 30*time.Second); !errors.As(err, &errno) {
			return err
		}
		ev.Errno = int(errno)
		return nil
	})
	if err != nil || ev.Errno != int(unix.ETIMEDOUT) {
		t.Fatalf("connect to %s: %v, errno %d; want ETIMEDOUT", dst, err, ev.Errno)
	}
	ev.Time, ev.AsyncAfter = time.Now(), time.Since(start)
	ev.Remote = decode.Addr{Valid: true, Family: ev.Local.Family, IP: dst}
	return ev
}

func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// TestNodeLayerSNAT: pod 0 holds the 4 ports of the node's MASQUERADE
// range toward the server (nft and iptables-nft, IPv4 and IPv6); pod 1's
// connect times out, and its diagnosis names the node's SNAT, the taken
// port, the 4 entries and their pod address, the range, and fixes that
// fit it (widen, fewer connections; no --random-fully: not a clash).
func TestNodeLayerSNAT(t *testing.T) {
	for _, c := range []struct {
		tool string
		fam  int
	}{{snatlab.ToolNft, 4}, {snatlab.ToolIPTables, 4}, {snatlab.ToolNft, 6}} {
		l := snatlab.New(t, snatlab.Options{Tool: c.tool, Lo: 40000, Hi: 40003})
		l.Sandbox(t)
		b := watchDrops(t, l)
		l.Hold(t, 0, 4, c.fam)
		d := NewDiagnoser()
		d.NodeDrops = b
		ev := timeout(t, l.Pods[1], netip.MustParseAddrPort(snatlab.ServerDst(c.fam)))
		g := d.Diagnose(ev)
		if g == nil || g.Cause != CauseNodeSNAT || g.Node == nil || g.Node.SNAT == nil {
			t.Fatalf("%s/%d: diagnosis %+v, want the node's SNAT", c.tool, c.fam, g)
		}
		s := g.Node.SNAT
		if s.Entries != 4 || s.Lo != 40000 || s.Hi != 40003 || len(s.Holders) != 1 || s.Holders[0].Addr != snatlab.PodAddr(0, c.fam) || s.Holders[0].Entries != 4 {
			t.Errorf("%s/%d: SNAT %+v, want 4 entries of 40000-40003, all pod 0's", c.tool, c.fam, s)
		}
		if !g.Node.CountersKnown || g.Node.InsertFailed == 0 || g.Node.InDevice != "pod2" || g.Node.Where != "nf_hook_slow" {
			t.Errorf("%s/%d: node %+v, want insert_failed moved, in from pod2, freed in nf_hook_slow", c.tool, c.fam, g.Node)
		}
		fixes := strings.Join(g.Fix, "\n")
		if !strings.Contains(fixes, "widen the MASQUERADE range (40000-40003, 4 ports") || strings.Contains(fixes, "random-fully to") || !strings.Contains(fixes, snatlab.PodAddr(0, c.fam).String()+" holds 4") {
			t.Errorf("%s/%d: fixes\n%s", c.tool, c.fam, fixes)
		}
		t.Logf("%s/%d: %s\n%s", c.tool, c.fam, g.Verdict, fixes)
	}
}

// TestNodeLayerRule: a DROP rule in the node's forward chain: the layer is
// the firewall, conntrack's counters still.
func TestNodeLayerRule(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, DropTo: snatlab.ServerAddr(4)})
	l.Sandbox(t)
	d := NewDiagnoser()
	d.NodeDrops = watchDrops(t, l)
	g := d.Diagnose(timeout(t, l.Pods[0], netip.MustParseAddrPort(snatlab.ServerDst(4))))
	if g == nil || g.Cause != CauseNodeRule || g.Node.InsertFailed != 0 || g.Node.CTDrop != 0 {
		t.Fatalf("diagnosis %+v (node %+v), want a node rule, counters still", g, g.Node)
	}
	t.Log(g.Verdict)
}

// TestNodeLayerBeyond: the SYNs leave the node toward an address nobody
// answers: no drop of the node's, so the verdict says the loss is beyond
// it; and a timeout eaddr began watching after says it cannot know.
func TestNodeLayerBeyond(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft})
	l.Sandbox(t)
	l.RouteNowhere(t)
	d := NewDiagnoser()
	d.NodeDrops = watchDrops(t, l)
	ev := timeout(t, l.Pods[0], netip.AddrPortFrom(snatlab.Nowhere, 80))
	g := d.Diagnose(ev)
	if g == nil || g.Cause != CauseBeyondNode || g.Node.Drops != 0 {
		t.Fatalf("diagnosis %+v, want beyond the node", g)
	}
	ev.AsyncAfter += time.Minute // began before eaddr watched
	ev.Local.IP = netip.AddrPortFrom(ev.Local.IP.Addr(), ev.Local.IP.Port()+1)
	if g := d.Diagnose(ev); g.Cause != CauseNodeMaybeMissed {
		t.Errorf("a connect begun before the watch: %s, want %s", g.Cause, CauseNodeMaybeMissed)
	}
}

var netdiagKsyms = netdiag.Kallsyms{}
