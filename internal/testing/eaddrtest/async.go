package eaddrtest

import (
	"context"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// BlackholeNS returns a fresh netns in which a SYN to 10.9.0.2:80 goes out
// on a veth to a MAC nobody has (a permanent neighbour entry), so it is
// dropped without an answer; net.ipv4.tcp_syn_retries=1 makes the kernel
// give up with ETIMEDOUT after about 3 s. Nothing leaves the netns.
func BlackholeNS(t *testing.T) *netns.NS {
	t.Helper()
	ns := EmptyNS(t)
	if err := ns.SetSysctl("net.ipv4.tcp_syn_retries", "1"); err != nil {
		t.Fatal(err)
	}
	script := "ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up && " +
		"ip addr add 10.9.0.1/24 dev v0 && ip neigh add 10.9.0.2 lladdr 02:00:00:00:00:01 dev v0 nud permanent"
	if out, _, err := RunIn(context.Background(), ns, []string{"sh", "-c", script}); err != nil || out != "" {
		t.Fatalf("setting up the blackhole: %v %s", err, out)
	}
	return ns
}
