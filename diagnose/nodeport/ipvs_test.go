package nodeport

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testenv"
)

// LoadIPVS loads ip_vs and the rr scheduler with the kernel's own modprobe
// (/proc/sys/kernel/modprobe: in make kernels' guests, the wrapper that
// knows the guest kernel's module tree). It skips when the kernel has no
// ip_vs (this machine's 6.18: CONFIG_IP_VS is not set), which no package
// installs; make kernels runs the IPVS tests on Debian's 6.1 and 6.12,
// where a skip fails the entry.
func loadIPVS(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		return
	}
	mp := "/sbin/modprobe"
	if b, err := os.ReadFile("/proc/sys/kernel/modprobe"); err == nil && strings.TrimSpace(string(b)) != "" {
		mp = strings.TrimSpace(string(b))
	}
	out, err := exec.Command(mp, "ip_vs").CombinedOutput()
	if err != nil {
		t.Skipf("this kernel has no ip_vs (%s ip_vs: %v: %s)", mp, err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command(mp, "ip_vs_rr").CombinedOutput(); err != nil {
		t.Fatalf("%s ip_vs_rr: %v: %s", mp, err, out)
	}
}

// TestIPVSNodePorts: virtual services as kube-proxy's IPVS mode makes them
// for a NodePort (one per node address, masquerading to the backends),
// read back with their address and first real server; another port and
// another netns's services are misses.
func TestIPVSNodePorts(t *testing.T) {
	testenv.RequireRoot(t)
	loadIPVS(t)
	const extra = 12
	ipvsadm := testenv.Program(t, "ipvsadm", "ipvsadm")
	ns := newNS(t)
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
	other := newNS(t)
	run(t, other, ipvsadm, "-A", "-t", "192.0.2.1:31000", "-s", "rr")

	tab := readIn(t, ns)
	if s := source(t, tab, ModeIPVS); s.Err != nil || s.Entries != 3+extra || s.Skipped != 1 {
		t.Errorf("ipvs source %+v, want %d entries, 1 skipped (the fwmark service), no error", s, 3+extra)
	}
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	node := netip.MustParseAddr("192.0.2.1")
	for i := range extra {
		wantHit(t, tab, tcp, uint16(30100+i), Hit{Mode: ModeIPVS, Port: uint16(30100 + i), Proto: tcp, Addr: node,
			Backend: fmt.Sprintf("198.51.100.7:%d", 8100+i)})
	}
	wantHit(t, tab, tcp, 30080, Hit{Mode: ModeIPVS, Port: 30080, Proto: tcp, Addr: node, Backend: "198.51.100.7:8080"})
	wantHit(t, tab, udp, 30053, Hit{Mode: ModeIPVS, Port: 30053, Proto: udp, Addr: node})
	wantHit(t, tab, tcp, 30443, Hit{Mode: ModeIPVS, Port: 30443, Proto: tcp, Addr: netip.MustParseAddr("2001:db8::1"), Backend: "[2001:db8::7]:443"})
	if h, ok := tab.FindAddr(tcp, netip.MustParseAddr("::ffff:192.0.2.1"), 30080); !ok || h.Addr != node {
		t.Errorf("FindAddr(tcp, ::ffff:192.0.2.1, 30080) = %+v, %v; want the service at %s", h, ok, node)
	}
	if h, ok := tab.FindAddr(tcp, netip.MustParseAddr("192.0.2.9"), 30080); ok {
		t.Errorf("FindAddr(tcp, 192.0.2.9, 30080) = %+v, want no hit: IPVS matches the address", h)
	}
	wantMiss(t, tab, tcp, 30081)
	wantMiss(t, tab, tcp, 30053)
	wantMiss(t, tab, tcp, 31000)

	o := readIn(t, other)
	wantHit(t, o, tcp, 31000, Hit{Mode: ModeIPVS, Port: 31000, Proto: tcp, Addr: node})
	wantMiss(t, o, tcp, 30080)
}

// TestIPVSNotLoaded: on a kernel without the IPVS family, the source says
// the module is not loaded and the other sources are still read.
func TestIPVSNotLoaded(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("ip_vs is loaded on this kernel: TestIPVSNodePorts covers it")
	}
	tab := readIn(t, newNS(t))
	s := source(t, tab, ModeIPVS)
	if !errors.Is(s.Err, errNoIPVS) || !strings.Contains(s.Err.Error(), "module not loaded") {
		t.Errorf("ipvs source %+v, want the error %q", s, errNoIPVS)
	}
	if s := source(t, tab, ModeNftables); s.Err != nil {
		t.Errorf("nftables source %+v, want read", s)
	}
}
