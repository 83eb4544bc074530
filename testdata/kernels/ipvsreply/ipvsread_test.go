package ipvsreply

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose/nodeport"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// TestIPVSNodePorts (here, not in diagnose/nodeport, because only the
// guests of make kernels have IPVS: this machine's kernel has none, and
// `go test ./...` leaves testdata out, so make test lists no skip for it):
// virtual services as kube-proxy's IPVS mode makes them
// for a NodePort (one per node address, masquerading to the backends),
// read back with their address and first real server; another port and
// another netns's services are misses.
func TestIPVSNodePorts(t *testing.T) {
	testenv.RequireRoot(t)
	loadIPVS(t)
	const extra = 12
	ipvsadm := testenv.Program(t, "ipvsadm", "ipvsadm")
	ns := testns.New(t)
	run(t, ns, ipvsadm, "-A", "-t", "192.0.2.1:30080", "-s", "rr")
	run(t, ns, ipvsadm, "-a", "-t", "192.0.2.1:30080", "-r", "198.51.100.7:8080", "-m")
	run(t, ns, ipvsadm, "-A", "-u", "192.0.2.1:30053", "-s", "rr")
	run(t, ns, ipvsadm, "-A", "-t", "[2001:db8::1]:30443", "-s", "rr")
	run(t, ns, ipvsadm, "-a", "-t", "[2001:db8::1]:30443", "-r", "[2001:db8::7]:443", "-m")
	run(t, ns, ipvsadm, "-A", "-f", "7", "-s", "rr") // a firewall-mark service: no port
	// more services, each with its own backend: the dump spans more
	// messages, and every service's backend must be its own
	for i := range extra {
		svc := fmt.Sprintf("192.0.2.1:%d", 30100+i)
		run(t, ns, ipvsadm, "-A", "-t", svc, "-s", "rr")
		run(t, ns, ipvsadm, "-a", "-t", svc, "-r", fmt.Sprintf("198.51.100.7:%d", 8100+i), "-m")
	}
	other := testns.New(t)
	run(t, other, ipvsadm, "-A", "-t", "192.0.2.1:31000", "-s", "rr")

	tab := read(t, ns)
	if s := source(t, tab, nodeport.ModeIPVS); s.Err != nil || s.Entries != 3+extra || s.Skipped != 1 {
		t.Errorf("ipvs source %+v, want %d entries, 1 skipped (the fwmark service), no error", s, 3+extra)
	}
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	node := netip.MustParseAddr("192.0.2.1")
	for i := range extra {
		wantHit(t, tab, tcp, uint16(30100+i), nodeport.Hit{Mode: nodeport.ModeIPVS, Port: uint16(30100 + i), Proto: tcp, Addr: node,
			Backend: fmt.Sprintf("198.51.100.7:%d", 8100+i)})
	}
	wantHit(t, tab, tcp, 30080, nodeport.Hit{Mode: nodeport.ModeIPVS, Port: 30080, Proto: tcp, Addr: node, Backend: "198.51.100.7:8080"})
	wantHit(t, tab, udp, 30053, nodeport.Hit{Mode: nodeport.ModeIPVS, Port: 30053, Proto: udp, Addr: node})
	wantHit(t, tab, tcp, 30443, nodeport.Hit{Mode: nodeport.ModeIPVS, Port: 30443, Proto: tcp, Addr: netip.MustParseAddr("2001:db8::1"), Backend: "[2001:db8::7]:443"})
	if h, ok := tab.FindAddr(tcp, netip.MustParseAddr("::ffff:192.0.2.1"), 30080); !ok || h.Addr != node {
		t.Errorf("FindAddr(tcp, ::ffff:192.0.2.1, 30080) = %+v, %v; want the service at %s", h, ok, node)
	}
	if h, ok := tab.FindAddr(tcp, netip.MustParseAddr("192.0.2.9"), 30080); ok {
		t.Errorf("FindAddr(tcp, 192.0.2.9, 30080) = %+v, want no hit: IPVS matches the address", h)
	}
	wantMiss(t, tab, tcp, 30081)
	wantMiss(t, tab, tcp, 30053)
	wantMiss(t, tab, tcp, 31000)

	o := read(t, other)
	wantHit(t, o, tcp, 31000, nodeport.Hit{Mode: nodeport.ModeIPVS, Port: 31000, Proto: tcp, Addr: node})
	wantMiss(t, o, tcp, 30080)
}

// source returns the Source of name.
func source(t *testing.T, tab *nodeport.Table, name string) nodeport.Source {
	t.Helper()
	for _, s := range tab.Sources {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no source %s in %s", name, tab)
	return nodeport.Source{}
}

// wantHit checks that Find gives the rule wanted.
func wantHit(t *testing.T, tab *nodeport.Table, proto uint8, port uint16, want nodeport.Hit) {
	t.Helper()
	got, ok := tab.Find(proto, port)
	if !ok {
		t.Errorf("Find(%d, %d): no hit, want %+v", proto, port, want)
		return
	}
	if got != want {
		t.Errorf("Find(%d, %d) = %+v, want %+v", proto, port, got, want)
	}
}

// wantMiss checks that Find finds nothing.
func wantMiss(t *testing.T, tab *nodeport.Table, proto uint8, port uint16) {
	t.Helper()
	if got, ok := tab.Find(proto, port); ok {
		t.Errorf("Find(%d, %d) = %+v, want no hit", proto, port, got)
	}
}
