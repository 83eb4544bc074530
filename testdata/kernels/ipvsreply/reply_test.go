package ipvsreply

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/nodeport"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/connwait"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

const (
	nodeAddr = "192.0.2.1"
	peerAddr = "192.0.2.2"
	nodePort = 30080
	freePort = 30090 // no virtual service
	peerPort = 8081
	backend  = "192.0.2.3:8080" // the "pod" behind the NodePort: on no interface
)

// TestIPVSTakesNodePortReply: see the package comment.
func TestIPVSTakesNodePortReply(t *testing.T) {
	testenv.RequireRoot(t)
	loadIPVS(t)
	ipvsadm := testenv.Program(t, "ipvsadm", "ipvsadm")
	ip := testenv.Program(t, "ip", "iproute2")
	node, peer := testns.New(t), testns.New(t)
	run(t, node, ip, "link", "add", "np0", "type", "veth", "peer", "name", "np1")
	run(t, node, ip, "link", "set", "np1", "netns", peer.Path())
	run(t, node, ip, "addr", "add", nodeAddr+"/24", "dev", "np0")
	run(t, node, ip, "link", "set", "np0", "up")
	run(t, peer, ip, "addr", "add", peerAddr+"/24", "dev", "np1")
	run(t, peer, ip, "link", "set", "np1", "up")
	ln, err := peer.Listen("tcp", fmt.Sprintf("%s:%d", peerAddr, peerPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go accept(ln)
	setSysctl(t, node, "net.ipv4.tcp_syn_retries", "1")
	svc := fmt.Sprintf("%s:%d", nodeAddr, nodePort)
	run(t, node, ipvsadm, "-A", "-t", svc, "-s", "rr")
	run(t, node, ipvsadm, "-a", "-t", svc, "-r", backend, "-m")

	// the kernel must pick the NodePort as the source port
	setSysctl(t, node, "net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", nodePort, nodePort))
	t0 := time.Now()
	port, err := connect(t, node)
	t.Logf("connect from the NodePort: local port %d, %v after %v", port, err, time.Since(t0).Round(time.Millisecond))
	t.Logf("node ip_vs_conn:\n%s", readNet(t, node, "ip_vs_conn"))
	t.Logf("ipvsadm -Ln --stats --exact:\n%s", output(t, node, ipvsadm, "-Ln", "--stats", "--exact"))
	if port != nodePort {
		t.Fatalf("the kernel picked local port %d, want %d (ip_local_port_range)", port, nodePort)
	}
	if !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("connect from %s:%d to the peer: %v, want ETIMEDOUT (IPVS takes the SYN-ACK)", nodeAddr, port, err)
	}
	// the reply became an IPVS connection: from the peer, to the virtual service
	if c := readNet(t, node, "ip_vs_conn"); !strings.Contains(c, "C0000202 1F91 C0000201 7580") {
		t.Errorf("no IPVS connection 192.0.2.2:8081 -> %s in ip_vs_conn:\n%s", svc, c)
	}

	tab := read(t, node)
	h, ok := tab.FindAddr(unix.IPPROTO_TCP, netip.MustParseAddr(nodeAddr), nodePort)
	if !ok || h.Mode != nodeport.ModeIPVS || h.Backend != backend {
		t.Errorf("nodeport FindAddr(tcp, %s, %d) = %+v, %v; want the IPVS service to %s", nodeAddr, nodePort, h, ok, backend)
	}

	diagnoseTimeout(t, node, port)

	// control: the same connect from a port that is no virtual service
	setSysctl(t, node, "net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", freePort, freePort))
	t0 = time.Now()
	port, err = connect(t, node)
	t.Logf("connect from %d (no virtual service): %v after %v", port, err, time.Since(t0).Round(time.Millisecond))
	if port != freePort || err != nil {
		t.Errorf("connect from %d: local port %d, %v; want %d, connected", freePort, port, err, freePort)
	}
}

// diagnoseTimeout: eaddr's diagnosis of that timeout, with the node netns
// as the host's and its IPVS rules read as a node's would be, says the
// reply was likely taken and names the virtual service and its backend.
func diagnoseTimeout(t *testing.T, node *netns.NS, port int) {
	t.Helper()
	pause := exec.Command("sleep", "600") // the node's own processes: the netns is reached through one
	if err := node.Start(pause); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pause.Process.Kill(); pause.Wait() })
	d := diagnose.NewDiagnoser()
	d.HostNetNS = node.Inode()
	d.NodePortRules = diagnose.NewHostRules(node.Inode())
	local := netip.AddrPortFrom(netip.MustParseAddr(nodeAddr), uint16(port))
	ev := &decode.Event{Syscall: decode.Connect, Errno: int(unix.ETIMEDOUT), NetNS: uint32(node.Inode()), PID: uint32(pause.Process.Pid),
		HasSocket: true, Family: unix.AF_INET, Protocol: unix.IPPROTO_TCP, LocalReleased: true,
		Local:  decode.Addr{Valid: true, Family: unix.AF_INET, IP: local},
		Remote: decode.Addr{Valid: true, Family: unix.AF_INET, IP: netip.AddrPortFrom(netip.MustParseAddr(peerAddr), peerPort)}}
	g := d.Diagnose(ev)
	if g == nil {
		t.Fatal("no diagnosis of the timeout")
	}
	t.Logf("diagnosis: %s; fix %q", g.Verdict, g.Fix)
	want := fmt.Sprintf("a rule that names no Service (ipvs virtual service %s:%d, backend %s)", nodeAddr, nodePort, backend)
	if !strings.Contains(g.Verdict, "likely taken by a NodePort rule") || !strings.Contains(g.Verdict, want) {
		t.Errorf("diagnosis %q: want the reply likely taken, and %q", g.Verdict, want)
	}
}

// connect makes a non-blocking TCP connect from a thread in ns to the
// peer, with the kernel picking the source port, and waits for the
// kernel's verdict (nil: connected; ETIMEDOUT: the handshake never
// completed). It returns the local port the kernel picked.
func connect(t *testing.T, ns *netns.NS) (int, error) {
	t.Helper()
	var port int
	var verdict error
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		dst := &unix.SockaddrInet4{Port: peerPort, Addr: netip.MustParseAddr(peerAddr).As4()}
		if err := unix.Connect(fd, dst); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			return fmt.Errorf("connect: %w", err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			return err
		}
		port = sa.(*unix.SockaddrInet4).Port
		verdict = connwait.Outcome(fd, 2*time.Minute) // with tcp_syn_retries 1 the kernel gives up after about 3 s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return port, verdict
}

func accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// read runs nodeport.Read inside ns.
func read(t *testing.T, ns *netns.NS) *nodeport.Table {
	t.Helper()
	var tab *nodeport.Table
	if err := ns.Do(func() (err error) { tab, err = nodeport.Read(); return err }); err != nil {
		t.Fatalf("nodeport.Read: %v", err)
	}
	t.Logf("nodeport.Read: %s", tab)
	return tab
}

// readNet reads /proc/net/NAME of ns.
func readNet(t *testing.T, ns *netns.NS, name string) string {
	t.Helper()
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile("/proc/thread-self/net/" + name); return err }); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func setSysctl(t *testing.T, ns *netns.NS, name, value string) {
	t.Helper()
	if err := ns.SetSysctl(name, value); err != nil {
		t.Fatal(err)
	}
}

// run runs a program in ns and fails the test when it fails.
func run(t *testing.T, ns *netns.NS, prog string, args ...string) {
	t.Helper()
	output(t, ns, prog, args...)
}

// output runs a program in ns and returns its output.
func output(t *testing.T, ns *netns.NS, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatalf("%s %s: %v", prog, strings.Join(args, " "), err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// loadIPVS loads ip_vs and ip_vs_rr with the kernel's own modprobe
// (/proc/sys/kernel/modprobe: in make kernels' guests, the wrapper that
// knows the guest kernel's module tree). A kernel without them skips (no
// package installs a module); the guests of make kernels have them, and
// there a skip fails the entry.
func loadIPVS(t *testing.T) {
	t.Helper()
	mp := "/sbin/modprobe"
	if b, err := os.ReadFile("/proc/sys/kernel/modprobe"); err == nil && strings.TrimSpace(string(b)) != "" {
		mp = strings.TrimSpace(string(b))
	}
	for _, m := range []string{"ip_vs", "ip_vs_rr"} {
		if out, err := exec.Command(mp, m).CombinedOutput(); err != nil {
			t.Skipf("this kernel has no %s (%s %s: %v: %s)", m, mp, m, err, strings.TrimSpace(string(out)))
		}
	}
}
