package netdiag

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A netns made by `ip netns add` has no process in it: OpenNetns enters it
// through its mount (PID 0) and reads its own sysctls and the sockets made
// in it by a process outside it; NetNSMounts names the mount. Deleted, it
// is not found any more.
func TestOpenNetnsThroughItsMount(t *testing.T) {
	testenv.RequireRoot(t)
	ip := testenv.Program(t, "ip", "iproute2")
	name := fmt.Sprintf("eaddr-netdiag-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	deleted := false
	del := func() {
		if !deleted {
			deleted = true
			if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
				t.Errorf("ip netns del: %v: %s", err, out)
			}
		}
	}
	t.Cleanup(del)
	if out, err := exec.Command(ip, "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	path := RunNetNS + "/" + name
	mine, err := netns.Open(path) // this test's hand in it: a listener and a connection, from outside it
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	inode := mine.Inode()
	if err := mine.SetSysctl("net.ipv4.ip_local_port_range", "40000 40009"); err != nil {
		t.Fatal(err)
	}
	l, err := mine.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := mine.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	mounts, err := NetNSMounts()
	if err != nil || mounts[inode] != path {
		t.Fatalf("NetNSMounts: %v, %v; want %d at %s", mounts, err, inode, path)
	}
	n, err := OpenNetns(inode)
	if err != nil {
		t.Fatalf("OpenNetns of a netns with no process but a mount: %v", err)
	}
	sc, err := n.Sysctls()
	socks, derr := n.DumpSockets(false)
	n.Close()
	if err != nil || derr != nil || n.PID() != 0 || sc.RangeLo != 40000 || sc.RangeHi != 40009 || !hasLocal(socks, c.LocalAddr()) {
		t.Errorf("through the mount: pid %d, range %d-%d (%v), sockets %v (%v); want pid 0, 40000-40009 and %s",
			n.PID(), sc.RangeLo, sc.RangeHi, err, socks, derr, c.LocalAddr())
	}
	c.Close()
	l.Close()
	mine.Close()
	del()
	if n, err := OpenNetns(inode); !errors.Is(err, ErrNoProcess) {
		t.Errorf("deleted: %v, %v; want ErrNoProcess", n, err)
	}
}

func hasLocal(socks []Socket, a net.Addr) bool {
	for _, s := range socks {
		if s.Local.String() == a.String() {
			return true
		}
	}
	return false
}
