package nodeport

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// kubeProxyNft writes, with nft, the NodePort maps the way kube-proxy's
// nftables proxier writes them (pkg/proxy/nftables/proxier.go), in family
// fam (ip or ip6), with the elements given ("tcp . 30080 : goto CHAIN").
func kubeProxyNft(t *testing.T, ns *netns.NS, fam string, chains []string, nodePorts, noEndpoints string) {
	t.Helper()
	nft := testenv.Program(t, "nft", "nftables")
	script := "add table " + fam + " kube-proxy { comment \"rules for kube-proxy\" ; }\n"
	for _, c := range chains {
		script += "add chain " + fam + " kube-proxy " + c + "\n"
	}
	script += "add chain " + fam + " kube-proxy reject-chain\n" +
		"add map " + fam + " kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment \"NodePort traffic\" ; }\n" +
		"add map " + fam + " kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }\n"
	if nodePorts != "" {
		script += "add element " + fam + " kube-proxy service-nodeports { " + nodePorts + " }\n"
	}
	if noEndpoints != "" {
		script += "add element " + fam + " kube-proxy no-endpoint-nodeports { " + noEndpoints + " }\n"
	}
	run(t, ns, nft, "-f", writeFile(t, script))
}

// TestNftablesNodePorts: the maps of kube-proxy's nftables mode, IPv4 and
// IPv6, read back with the Service port each element names; a port not in
// the maps is a miss, as are the rules of another netns.
func TestNftablesNodePorts(t *testing.T) {
	ns := testns.New(t)
	web := "external-ULMVA6XW-eaddr-test/web/tcp/http"
	dns := "external-4ABCDEFG-kube-system/dns/udp/dns"
	unnamed := "external-ZZZZZZZZ-eaddr-test/plain/tcp/"
	kubeProxyNft(t, ns, "ip", []string{web, dns, unnamed},
		"tcp . 30080 : goto "+web+", udp . 30053 : goto "+dns+", tcp . 30081 : goto "+unnamed,
		"tcp . 30090 comment \"eaddr-test/none:p\" : goto reject-chain")
	kubeProxyNft(t, ns, "ip6", []string{web}, "tcp . 30443 : goto "+web, "")
	other := testns.New(t)
	kubeProxyNft(t, other, "ip", []string{web}, "tcp . 31000 : goto "+web, "")

	tab := readIn(t, ns)
	if s := source(t, tab, ModeNftables); s.Err != nil || s.Entries != 5 || s.Skipped != 0 {
		t.Errorf("nftables source %+v, want 5 entries, none skipped, no error", s)
	}
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	wantHit(t, tab, tcp, 30080, Hit{Mode: ModeNftables, Service: "eaddr-test/web:http", Port: 30080, Proto: tcp, Verdict: "goto " + web})
	wantHit(t, tab, udp, 30053, Hit{Mode: ModeNftables, Service: "kube-system/dns:dns", Port: 30053, Proto: udp, Verdict: "goto " + dns})
	wantHit(t, tab, tcp, 30081, Hit{Mode: ModeNftables, Service: "eaddr-test/plain", Port: 30081, Proto: tcp, Verdict: "goto " + unnamed})
	wantHit(t, tab, tcp, 30090, Hit{Mode: ModeNftables, Service: "eaddr-test/none:p", Port: 30090, Proto: tcp, Verdict: "goto reject-chain"})
	wantHit(t, tab, tcp, 30443, Hit{Mode: ModeNftables, Service: "eaddr-test/web:http", Port: 30443, Proto: tcp, Verdict: "goto " + web})
	wantMiss(t, tab, tcp, 30082)
	wantMiss(t, tab, tcp, 30053) // the udp NodePort, asked for tcp
	wantMiss(t, tab, tcp, 31000) // the other netns's

	// the other netns sees its own rule only, a fresh netns nothing
	o := readIn(t, other)
	wantHit(t, o, tcp, 31000, Hit{Mode: ModeNftables, Service: "eaddr-test/web:http", Port: 31000, Proto: tcp, Verdict: "goto " + web})
	wantMiss(t, o, tcp, 30080)
	empty := readIn(t, testns.New(t))
	if s := source(t, empty, ModeNftables); s.Err != nil || s.Entries != 0 {
		t.Errorf("nftables source of an empty netns %+v, want read, 0 entries", s)
	}
	wantMiss(t, empty, tcp, 30080)
}

// TestHostRulesNotSeen: a kube-proxy map in the netns of the test process
// (the host's) is read there and never from a thread inside another netns.
// The table made is inert (a map and no base chain: no hook), and removed.
func TestHostRulesNotSeen(t *testing.T) {
	testenv.RequireRoot(t)
	nft := testenv.Program(t, "nft", "nftables")
	if exec.Command(nft, "list", "table", "ip", "kube-proxy").Run() == nil {
		t.Skip("this machine's netns has a table ip kube-proxy of its own: not touched")
	}
	script := "add table ip kube-proxy\n" +
		"add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; }\n" +
		"add chain ip kube-proxy external-HOSTHOST-eaddr-test/host/tcp/p\n" +
		"add element ip kube-proxy service-nodeports { tcp . 32766 : goto external-HOSTHOST-eaddr-test/host/tcp/p }\n"
	if out, err := exec.Command(nft, "-f", writeFile(t, script)).CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(nft, "delete", "table", "ip", "kube-proxy").CombinedOutput(); err != nil {
			t.Errorf("nft delete table ip kube-proxy: %v: %s", err, out)
		}
	})
	host, err := Read()
	if err != nil {
		t.Fatalf("Read in the host netns: %v", err)
	}
	tcp := uint8(unix.IPPROTO_TCP)
	wantHit(t, host, tcp, 32766, Hit{Mode: ModeNftables, Service: "eaddr-test/host:p", Port: 32766, Proto: tcp,
		Verdict: "goto external-HOSTHOST-eaddr-test/host/tcp/p"})
	wantMiss(t, readIn(t, testns.New(t)), tcp, 32766)
}
