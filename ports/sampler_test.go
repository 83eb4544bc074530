package ports

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
	"github.com/eaddr/eaddr/tracer"
)

// busyNetNS is a netns with a process that holds conns connections toward
// a listener of its own (127.0.0.1:5000, outside the range), tw more in
// TIME_WAIT on its side (it closed first), and a socket only bound to a
// port of the range; tcp_tw_reuse 0, so that a TIME_WAIT keeps its port
// toward the listener, as ss counts it.
type busyNetNS struct {
	ns       *netns.NS
	pid      int
	lo, hi   int
	conns    int
	tw       int
	reserved string
}

const busyScript = `import socket, sys
conns, tw = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 5000)); l.listen(4096)
b = socket.socket(); b.bind(("127.0.0.1", 0))
cs = [socket.create_connection(("127.0.0.1", 5000)) for _ in range(conns)]
ss = [l.accept()[0] for _ in range(conns)]
for _ in range(tw):
    c = socket.create_connection(("127.0.0.1", 5000)); s = l.accept()[0]
    c.close(); s.recv(1); s.close()
print("ready", flush=True)
sys.stdin.read()
`

func newBusyNetNS(tb testing.TB, lo, hi, conns, tw int, reserved string) *busyNetNS {
	tb.Helper()
	ns := testns.New(tb)
	for name, v := range map[string]string{"net.ipv4.ip_local_port_range": fmt.Sprintf("%d %d", lo, hi),
		"net.ipv4.tcp_tw_reuse": "0", "net.ipv4.ip_local_reserved_ports": reserved} {
		if err := ns.SetSysctl(name, v); err != nil {
			tb.Fatal(err)
		}
	}
	cmd := exec.Command("python3", "-c", busyScript, strconv.Itoa(conns), strconv.Itoa(tw))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := ns.Start(cmd); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		tb.Fatalf("python in %v: %q %v", ns, line, err)
	}
	return &busyNetNS{ns: ns, pid: cmd.Process.Pid, lo: lo, hi: hi, conns: conns, tw: tw, reserved: reserved}
}

// ss counts, as `ss -tanH` in the netns shows them now, the sockets on a
// port of the range (reserved ones left out) toward the listener,
// established and in TIME_WAIT.
func (b *busyNetNS) ss(t *testing.T) (estab, tw int) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(b.pid)+"/ns/net", "ss", "-tanH").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "127.0.0.1:5000" {
			continue
		}
		_, p, _ := net.SplitHostPort(f[3])
		if port, _ := strconv.Atoi(p); port < b.lo || port > b.hi {
			continue
		}
		switch f[0] {
		case "ESTAB":
			estab++
		case "TIME-WAIT":
			tw++
		}
	}
	return estab, tw
}

// check compares the sampler's report of b's netns with ss and what the
// test made: the ports toward the listener are its connections and
// TIME_WAITs, as ss shows them, and the bound socket, held for all.
func (b *busyNetNS) check(t *testing.T, r *diagnose.NetNSReport, usable int) {
	t.Helper()
	estab, tw := b.ss(t)
	if estab != b.conns || tw != b.tw {
		t.Fatalf("%s: ss shows %d established and %d TIME_WAIT toward the listener; the test made %d and %d", b.ns, estab, tw, b.conns, b.tw)
	}
	want := estab + tw + 1
	if r.Error != "" || r.Usable != usable || r.HeldForAll != 1 || r.Unsure != 0 || r.PID == 0 || r.Source != "iterator" {
		t.Errorf("%s: %+v; want usable %d, 1 port held for all, none unsure, from the iterator", b.ns, r, usable)
	}
	if len(r.Destinations) != 1 || r.Destinations[0].Remote != "127.0.0.1:5000" || r.Destinations[0].Ports != want || r.Destinations[0].Toward != estab+tw {
		t.Errorf("%s: destinations %+v; want 127.0.0.1:5000 with %d ports (%d established and %d TIME_WAIT, as ss shows, and the bound one)",
			b.ns, r.Destinations, want, estab, tw)
	}
}

func sockIter(t *testing.T) *tracer.SockIter {
	it, err := tracer.NewSockIter()
	if err != nil {
		t.Fatalf("NewSockIter: %+v", err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

// sampleOnly samples the given netns with s.
func sampleOnly(t *testing.T, c Config, inodes ...uint64) (*Sample, string) {
	t.Helper()
	c.Only = inodes
	s := New(c)
	defer s.Close()
	smp, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.NetNS) != len(inodes) || smp.Skipped != 0 || smp.Cut != 0 {
		t.Fatalf("sample of %v: %+v", inodes, smp)
	}
	return smp, smp.Reader
}

// The sampler's numbers equal ss at the same moment, read by the node walk
// and by each netns's own read alike, in three netns of different ranges
// and reserved ports.
func TestSamplerEqualsSS(t *testing.T) {
	testenv.RequireRoot(t) // the BPF iterator, netns of its own
	it := sockIter(t)
	all := []*busyNetNS{newBusyNetNS(t, 40000, 40099, 30, 10, ""), newBusyNetNS(t, 41000, 41999, 120, 40, "41500-41599"),
		newBusyNetNS(t, 42000, 42063, 20, 0, "42001")}
	usable := []int{100, 900, 63}
	var inodes []uint64
	for _, b := range all {
		inodes = append(inodes, b.ns.Inode())
	}
	for _, noWalk := range []bool{false, true} {
		smp, reader := sampleOnly(t, Config{NoWalk: noWalk, Audit: diagnose.AuditOptions{Top: 3, Iter: it}}, inodes...)
		if want := map[bool]string{false: "node walk", true: "per netns: asked for"}[noWalk]; reader != want {
			t.Fatalf("read by %q, want %q", reader, want)
		}
		for i, b := range all {
			k := slices.IndexFunc(smp.NetNS, func(r diagnose.NetNSReport) bool { return r.Inode == b.ns.Inode() })
			b.check(t, &smp.NetNS[k], usable[i])
		}
	}
}

// TestSamplerEqualsSSNodeScale: at node scale, 100 netns of 100
// connections each, the last ten with 10 TIME_WAIT too (about 20,000
// sockets beside the node's own), each with a range of its own, one node
// walk's numbers for every netns equal ss's in that netns, read after the
// sample (nothing changes in between: the connections are held; a
// TIME_WAIT lives 60 s, less than making the 100 netns takes here, so
// only the last ten have them).
func TestSamplerEqualsSSNodeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 100 netns and 22,000 sockets")
	}
	var all []*busyNetNS
	var inodes []uint64
	for i := range 100 {
		lo := 40000 + 200*i
		all = append(all, newBusyNetNS(t, lo, lo+149, 100, 10*(i/90), ""))
		inodes = append(inodes, all[i].ns.Inode())
	}
	smp, reader := sampleOnly(t, Config{Audit: diagnose.AuditOptions{Top: 3}}, inodes...)
	if reader != "node walk" {
		t.Fatalf("read by %q, want the node walk", reader)
	}
	for _, b := range all {
		k := slices.IndexFunc(smp.NetNS, func(r diagnose.NetNSReport) bool { return r.Inode == b.ns.Inode() })
		b.check(t, &smp.NetNS[k], 150)
	}
}
