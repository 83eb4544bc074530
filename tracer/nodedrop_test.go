//go:build linux

package tracer

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func newNodeDrops(t *testing.T) *NodeDrops {
	t.Helper()
	testenv.RequireRoot(t)
	n, err := NewNodeDrops(NodeDropOptions{})
	if err != nil {
		t.Fatalf("NewNodeDrops: %+v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// dropOf reads drops until one of the lab's node whose original tuple
// (or, without a conntrack entry, whose header) comes from src toward dst,
// within 10 s. Other netns's drops are passed over: another test's lab,
// running at the same time, has the same addresses.
func dropOf(t *testing.T, n *NodeDrops, l *snatlab.Lab, src netip.Addr, dst netip.AddrPort) NodeDropRecord {
	t.Helper()
	var d NodeDropRecord
	for deadline := time.Now().Add(10 * time.Second); ; {
		n.SetDeadline(deadline)
		if err := n.Read(&d); err != nil {
			t.Fatalf("no drop from %s to %s: %v", src, dst, err)
		}
		s, p, ds := d.HdrSrc, d.HdrDport, d.HdrDst
		if d.Flags&DropFlagCT != 0 {
			s, p, ds = d.CtSrc, d.CtDport, d.CtDst
		}
		if uint64(d.Netns) == l.Node.Inode() && addrOf(d.Family, s) == src && addrOf(d.Family, ds) == dst.Addr() && p == dst.Port() {
			return d
		}
	}
}

func addrOf(family uint16, b [16]byte) netip.Addr {
	if family == 10 {
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// try sends one connect from pod i that is not answered within a second
// (its SYN dropped), or one datagram.
func try(t *testing.T, l *snatlab.Lab, i int, network, dst string) {
	t.Helper()
	l.Pods[i].Do(func() error {
		c, err := net.DialTimeout(network, dst, time.Second)
		if err == nil && network == "udp" {
			c.Write([]byte("x"))
			time.Sleep(100 * time.Millisecond)
		}
		if err == nil {
			c.Close()
		}
		return nil
	})
}

// TestNodeDropSNAT: the lab's node narrows MASQUERADE to 4 ports, pod 0
// holds them toward the server, and pod 1's SYN is dropped by conntrack
// at confirm: the record has the pod's own 4-tuple (the entry's original
// tuple), the node's address in the reply tuple with a port of the range,
// NETFILTER_DROP, the node's netns and the pod's veth as input.
func TestNodeDropSNAT(t *testing.T) {
	for _, tool := range []string{snatlab.ToolNft, snatlab.ToolIPTables} {
		for _, fam := range []int{4, 6} {
			t.Run(tool+"/ipv"+string(rune('0'+fam)), func(t *testing.T) {
				l := snatlab.New(t, snatlab.Options{Tool: tool, Lo: 40000, Hi: 40003})
				n := newNodeDrops(t)
				l.Hold(t, 0, 4, fam)
				try(t, l, 1, "tcp", snatlab.ServerDst(fam))
				d := dropOf(t, n, l, snatlab.PodAddr(1, fam), netip.MustParseAddrPort(snatlab.ServerDst(fam)))
				checkSNATDrop(t, n, l, d, fam)
			})
		}
	}
}

func checkSNATDrop(t *testing.T, n *NodeDrops, l *snatlab.Lab, d NodeDropRecord, fam int) {
	t.Helper()
	if got := n.ReasonName(d.Reason); got != "NETFILTER_DROP" {
		t.Errorf("reason %s, want NETFILTER_DROP", got)
	}
	if d.Flags&(DropFlagCT|DropFlagSrcNAT|DropFlagConfirmed) != DropFlagCT|DropFlagSrcNAT {
		t.Errorf("flags %#x, want an unconfirmed entry with its SNAT done", d.Flags)
	}
	if uint64(d.Netns) != l.Node.Inode() {
		t.Errorf("netns %d, want the node's %d", d.Netns, l.Node.Inode())
	}
	if addrOf(d.Family, d.RpDst) != snatlab.NodeAddr(fam) || d.RpDport < 40000 || d.RpDport > 40003 {
		t.Errorf("reply tuple to %s:%d, want the node's %s and a port of 40000-40003", addrOf(d.Family, d.RpDst), d.RpDport, snatlab.NodeAddr(fam))
	}
	idx, err := ifindex(l, "pod2")
	if err != nil || d.InIfindex != int32(idx) {
		t.Errorf("input ifindex %d, want pod2's %d (%v)", d.InIfindex, idx, err)
	}
}

func ifindex(l *snatlab.Lab, dev string) (idx int, err error) {
	err = l.Node.Do(func() error {
		i, err := net.InterfaceByName(dev)
		if err == nil {
			idx = i.Index
		}
		return err
	})
	return idx, err
}

// TestNodeDropRule: a plain DROP rule in the node's forward chain drops
// the SYN before any NAT: its entry is unconfirmed, without SNAT.
func TestNodeDropRule(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, DropTo: snatlab.ServerAddr(4)})
	n := newNodeDrops(t)
	try(t, l, 0, "tcp", snatlab.ServerDst(4))
	d := dropOf(t, n, l, snatlab.PodAddr(0, 4), netip.MustParseAddrPort(snatlab.ServerDst(4)))
	if n.ReasonName(d.Reason) != "NETFILTER_DROP" || d.Flags&DropFlagSrcNAT != 0 {
		t.Errorf("reason %s flags %#x, want NETFILTER_DROP before SNAT", n.ReasonName(d.Reason), d.Flags)
	}
}

// TestNodeDropUDP: UDP through the exhausted SNAT: the datagram of an
// entry conntrack could not confirm is dropped and reported.
func TestNodeDropUDP(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40003})
	n := newNodeDrops(t)
	l.HoldUDP(t, 0, 4, 4)
	try(t, l, 1, "udp", snatlab.ServerDst(4))
	d := dropOf(t, n, l, snatlab.PodAddr(1, 4), netip.MustParseAddrPort(snatlab.ServerDst(4)))
	if d.Protocol != 17 || d.Flags&DropFlagConfirmed != 0 {
		t.Errorf("protocol %d flags %#x, want UDP, unconfirmed", d.Protocol, d.Flags)
	}
}

// TestNodeDropEstablishedIgnored: the packets of a flow past its first
// (an ACK, data) are not reported, though a rule drops them.
var droppedSome = regexp.MustCompile(`packets [1-9][0-9]* `)

func TestNodeDropEstablishedIgnored(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft})
	c := l.Hold(t, 0, 1, 4)[0]
	l.Run(t, l.Node, "nft", "add chain inet eaddr_lab out { type filter hook postrouting priority 0; }")
	l.Run(t, l.Node, "nft", "add rule inet eaddr_lab out tcp flags & syn == 0 counter drop")
	n := newNodeDrops(t)
	if _, err := c.Write([]byte("dropped")); err != nil {
		t.Fatal(err)
	}
	// The segment crosses the veth in a softirq of its own, later on a
	// loaded guest (and is sent again on its timer): wait until the rule
	// has dropped it, then look for a report.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out = l.Run(t, l.Node, "nft", "list chain inet eaddr_lab out")
		if droppedSome.MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rule dropped no packet in 30 s:\n%s", out)
		}
	}
	var d NodeDropRecord
	n.SetDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		err := n.Read(&d)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil || uint64(d.Netns) == l.Node.Inode() { // another test's lab may drop meanwhile
			t.Fatalf("a drop was reported: %+v, %v", d, err)
		}
	}
}
