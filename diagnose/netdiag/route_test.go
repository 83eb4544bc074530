package netdiag

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// ipIn runs `ip args...` inside ns (the netns test's own namespace).
func ipIn(t *testing.T, n *Netns, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", args...)
	if err := n.ns.Start(cmd); err != nil {
		t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
	}
}

// veth gives the netns an interface d0 that is up with a carrier (its peer
// d1 in the same netns; this host's kernel has no dummy module).
func veth(t *testing.T, n *Netns) {
	ipIn(t, n, "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ipIn(t, n, "link", "set", "d1", "up")
	ipIn(t, n, "link", "set", "d0", "up")
}

// TestSourceFor: the source the netns's routes pick, as `ip route get`
// reports it, for a destination on each of two interfaces.
func TestSourceFor(t *testing.T) {
	_, n := sandbox(t)
	veth(t, n)
	ipIn(t, n, "addr", "add", "10.9.0.2/24", "dev", "d0")
	ipIn(t, n, "addr", "add", "10.9.1.7/24", "dev", "d0")
	for dst, want := range map[string]string{"10.9.0.50": "10.9.0.2", "10.9.1.50": "10.9.1.7", "127.0.0.5": "127.0.0.1"} {
		src, err := n.SourceFor(netip.MustParseAddr(dst))
		if err != nil || src.String() != want {
			t.Errorf("SourceFor(%s) = %v, %v; want %s", dst, src, err, want)
		}
	}
	if src, err := n.SourceFor(netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Errorf("SourceFor(192.0.2.1) with no route = %v, want an error", src)
	}
}

// TestIfAddrsFlags: a tentative IPv6 address (duplicate address detection
// still running) is listed but not usable; one added with nodad is.
func TestIfAddrsFlags(t *testing.T) {
	_, n := sandbox(t)
	veth(t, n)
	if err := n.ns.SetSysctl("net.ipv6.conf.d0.dad_transmits", "50"); err != nil {
		t.Fatal(err)
	}
	ipIn(t, n, "addr", "add", "fd00:9::1/64", "dev", "d0")
	ipIn(t, n, "addr", "add", "fd00:9::2/64", "dev", "d0", "nodad")
	addrs, err := n.IfAddrs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]IfAddr{}
	for _, a := range addrs {
		got[a.Prefix.Addr().String()] = a
	}
	if a, ok := got["fd00:9::1"]; !ok || a.Usable() || a.FlagNames() != "tentative" {
		t.Errorf("fd00:9::1 = %+v (%q), want listed, tentative, not usable", a, a.FlagNames())
	}
	if a, ok := got["fd00:9::2"]; !ok || !a.Usable() {
		t.Errorf("fd00:9::2 = %+v, want listed and usable", a)
	}
	if a, ok := got["127.0.0.1"]; !ok || !a.Usable() || a.Prefix.Bits() != 8 {
		t.Errorf("127.0.0.1 = %+v, want 127.0.0.1/8 usable", a)
	}
}
