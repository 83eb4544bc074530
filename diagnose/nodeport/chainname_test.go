package nodeport

import (
	"net/netip"
	"testing"
)

// TestServiceFromChain: kube-proxy's nftables chain names give the Service
// port; any other name, or a truncated one, gives "".
func TestServiceFromChain(t *testing.T) {
	for _, c := range []struct{ chain, want string }{
		{"external-ULMVA6XW-default/web/tcp/http", "default/web:http"},
		{"service-ULMVA6XW-ns1/svc1/udp/p80", "ns1/svc1:p80"},
		{"local-ULMVA6XW-ns1/svc1/sctp/p", "ns1/svc1:p"},
		{"external-ULMVA6XW-default/web/tcp/", "default/web"},
		{"external-ULMVA6XW-default/web/tcp/http...", ""},   // truncated by kube-proxy
		{"endpoint-ULMVA6XW-ns/svc/tcp/p__10.0.0.1/80", ""}, // not a service chain
		{"external-ULMVA6X-default/web/tcp/http", ""},       // hash too short
		{"external-ULMVA6XW-default/web/icmp/http", ""},
		{"external-ULMVA6XW-default/web/tcp", ""},
		{"reject-chain", ""},
		{"KUBE-EXT-ABCDEF", ""},
		{"", ""},
	} {
		if got := serviceFromChain(c.chain); got != c.want {
			t.Errorf("serviceFromChain(%q) = %q, want %q", c.chain, got, c.want)
		}
	}
}

// TestFindOrder: an nftables or iptables rule catches the port on every
// address and wins; an IPVS service only at its address (FindAddr), any
// address for Find.
func TestFindOrder(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	tab := &Table{hits: map[key][]Hit{}}
	tab.collect(ModeIPVS, func() ([]Hit, int, error) {
		return []Hit{{Mode: ModeIPVS, Proto: 6, Port: 30080, Addr: a}, {Mode: ModeIPVS, Proto: 6, Port: 30081, Addr: a}}, 0, nil
	})
	tab.collect(ModeNftables, func() ([]Hit, int, error) {
		return []Hit{{Mode: ModeNftables, Proto: 6, Port: 30080, Service: "ns/web:http"}}, 0, nil
	})
	if h, ok := tab.Find(6, 30080); !ok || h.Mode != ModeNftables {
		t.Errorf("Find(6, 30080) = %+v, %v; want the nftables rule", h, ok)
	}
	if h, ok := tab.FindAddr(6, b, 30081); ok {
		t.Errorf("FindAddr(6, %s, 30081) = %+v; want no hit (the IPVS service is at %s)", b, h, a)
	}
	if h, ok := tab.FindAddr(6, a, 30081); !ok || h.Addr != a {
		t.Errorf("FindAddr(6, %s, 30081) = %+v, %v; want the IPVS service", a, h, ok)
	}
	if h, ok := tab.Find(6, 30081); !ok || h.Mode != ModeIPVS {
		t.Errorf("Find(6, 30081) = %+v, %v; want the IPVS service", h, ok)
	}
	if _, ok := (*Table)(nil).Find(6, 30080); ok {
		t.Error("Find on a nil Table found something")
	}
}
