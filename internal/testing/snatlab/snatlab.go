// Package snatlab builds, for tests, the node of issue 37's lab in throwaway
// network namespaces: pods behind a node that masquerades their traffic
// toward a server, with a narrowed SNAT port range that a few connections
// exhaust. Every namespace is made by internal/netns (no bind mount, no
// name): closing it at the test's cleanup removes its interfaces, rules and
// sysctls with it, and no packet can leave them.
//
//	pod i (10.98.i.2, fd00:ea:i::2) -- pod<i> | node | up0 (198.18.0.1, fd00:ea::1) -- up1 server (198.18.0.2, fd00:ea::2)
//
// The server has no route back to the pods: only the node's SNAT brings
// their replies home. Its listeners (TCP and UDP, port Port, both
// families) accept and hold every connection.
package snatlab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// Port is the server's TCP and UDP port.
const Port = 8080

// How the node's SNAT is written.
const (
	ToolNft      = "nft"          // table inet eaddr_lab: masquerade to :LO-HI
	ToolIPTables = "iptables-nft" // -t nat POSTROUTING -j MASQUERADE --to-ports LO-HI (and ip6tables-nft)
)

// Options shape the lab.
type Options struct {
	Tool   string // ToolNft or ToolIPTables
	Lo, Hi int    // MASQUERADE's port range; 0: none given (1024-65535)
	Pods   int    // pod namespaces; 0: 2
	// DropTo, when valid, adds a plain DROP rule in the node's forward
	// chain for TCP to this address (tool nft): the firewall case.
	DropTo netip.Addr
}

// Lab is the built lab.
type Lab struct {
	Node, Server *netns.NS
	Pods         []*netns.NS
	Opts         Options
	mu           sync.Mutex
	conns        []net.Conn
}

// ServerAddr is the server's address in family 4 or 6.
func ServerAddr(family int) netip.Addr {
	if family == 6 {
		return netip.MustParseAddr("fd00:ea::2")
	}
	return netip.MustParseAddr("198.18.0.2")
}

// NodeAddr is the node's egress address in family 4 or 6: what MASQUERADE
// writes as the source.
func NodeAddr(family int) netip.Addr {
	if family == 6 {
		return netip.MustParseAddr("fd00:ea::1")
	}
	return netip.MustParseAddr("198.18.0.1")
}

// PodAddr is pod i's (0-based) address in family 4 or 6.
func PodAddr(i, family int) netip.Addr {
	if family == 6 {
		return netip.MustParseAddr(fmt.Sprintf("fd00:ea:%d::2", i+1))
	}
	return netip.MustParseAddr(fmt.Sprintf("10.98.%d.2", i+1))
}

// New builds the lab; the test's cleanup takes it down.
func New(t testing.TB, o Options) *Lab {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.Program(t, "ip", "iproute2")
	if o.Pods == 0 {
		o.Pods = 2
	}
	l := &Lab{Opts: o}
	l.Node, l.Server = testns.New(t), testns.New(t)
	t.Cleanup(l.closeConns) // before the namespaces close (cleanups run last first)
	l.Run(t, l.Node, "ip", "link", "add", "up0", "type", "veth", "peer", "name", "up1", "netns", l.Server.Path())
	l.addr(t, l.Node, "up0", "198.18.0.1/24", "fd00:ea::1/64")
	l.addr(t, l.Server, "up1", "198.18.0.2/24", "fd00:ea::2/64")
	for i := range o.Pods {
		p := testns.New(t)
		l.Pods = append(l.Pods, p)
		dev := fmt.Sprintf("pod%d", i+1)
		l.Run(t, l.Node, "ip", "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", p.Path())
		l.addr(t, l.Node, dev, fmt.Sprintf("10.98.%d.1/24", i+1), fmt.Sprintf("fd00:ea:%d::1/64", i+1))
		l.addr(t, p, "eth0", PodAddr(i, 4).String()+"/24", PodAddr(i, 6).String()+"/64")
		l.Run(t, p, "ip", "route", "add", "default", "via", fmt.Sprintf("10.98.%d.1", i+1))
		l.Run(t, p, "ip", "-6", "route", "add", "default", "via", fmt.Sprintf("fd00:ea:%d::1", i+1))
		sysctls(t, p, map[string]string{"net.ipv4.tcp_syn_retries": "1"})
	}
	sysctls(t, l.Node, map[string]string{"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"})
	l.rules(t)
	l.serve(t)
	return l
}

func sysctls(t testing.TB, ns *netns.NS, kv map[string]string) {
	t.Helper()
	for k, v := range kv {
		if err := ns.SetSysctl(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// addr brings dev up with a v4 and a v6 address (no duplicate address
// detection: the v6 address is usable at once).
func (l *Lab) addr(t testing.TB, ns *netns.NS, dev, v4, v6 string) {
	t.Helper()
	l.Run(t, ns, "ip", "addr", "add", v4, "dev", dev)
	l.Run(t, ns, "ip", "addr", "add", v6, "dev", dev, "nodad")
	l.Run(t, ns, "ip", "link", "set", dev, "up")
}

// Run runs argv inside ns and fails the test on an error.
func (l *Lab) Run(t testing.TB, ns *netns.NS, argv ...string) string {
	t.Helper()
	out, err := Run(ns, argv...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// Run runs argv inside ns; its output, stdout and stderr together.
func Run(ns *netns.NS, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// rules writes the node's MASQUERADE (and DROP) rules with the chosen tool.
func (l *Lab) rules(t testing.TB) {
	t.Helper()
	o := l.Opts
	to := ""
	if o.Hi > 0 {
		to = fmt.Sprintf("%d-%d", o.Lo, o.Hi)
	}
	switch o.Tool {
	case ToolNft:
		nft := testenv.Program(t, "nft", "nftables")
		masq := "masquerade"
		if to != "" {
			masq = "meta l4proto { tcp, udp } masquerade to :" + to
		}
		drop := ""
		if o.DropTo.IsValid() {
			fam := "ip"
			if o.DropTo.Is6() {
				fam = "ip6"
			}
			drop = fmt.Sprintf("\tchain lab_forward {\n\t\ttype filter hook forward priority filter; %s daddr %s tcp dport %d drop\n\t}\n", fam, o.DropTo, Port)
		}
		ruleset := fmt.Sprintf("table inet eaddr_lab {\n\tchain post {\n\t\ttype nat hook postrouting priority srcnat; oifname \"up0\" %s\n\t}\n%s}", masq, drop)
		l.Run(t, l.Node, "sh", "-c", nft+" -f - <<'EOF'\n"+ruleset+"\nEOF")
	case ToolIPTables:
		for _, bin := range []string{"iptables-nft", "ip6tables-nft"} {
			ipt := testenv.Program(t, bin, "iptables")
			if to == "" {
				l.Run(t, l.Node, ipt, "-t", "nat", "-A", "POSTROUTING", "-o", "up0", "-j", "MASQUERADE")
				continue
			}
			for _, p := range []string{"tcp", "udp"} {
				l.Run(t, l.Node, ipt, "-t", "nat", "-A", "POSTROUTING", "-o", "up0", "-p", p, "-j", "MASQUERADE", "--to-ports", to)
			}
		}
		if o.DropTo.IsValid() {
			t.Fatal("snatlab: DropTo is written with nft only")
		}
	default:
		t.Fatalf("snatlab: unknown tool %q", o.Tool)
	}
}
