//go:build linux

package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// BenchmarkNodeDrop: the node drop program's cost per run, from the
// kernel's own statistics (BPF_ENABLE_STATS, undone at the end), side by
// side with an empty program on the same tracepoint: a drop whose reason
// is not watched (UDP to a closed port: NO_SOCKET), a watched drop that is
// no new flow's first packet (a confirmed UDP flow an nft rule drops), a
// new flow's first packet read whole into the ring, and one the rate
// limit holds back. Loopback in a throwaway netns: `go test -run x -bench
// NodeDrop ./tracer` (root); docs/performance.md has the figures.
func BenchmarkNodeDrop(b *testing.B) {
	testenv.RequireRoot(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF statistics: %v", err)
	}
	defer stats.Close()
	for _, c := range []struct {
		name  string
		rate  float64
		empty bool
		setup benchCase
	}{
		{"empty_program", 0, true, newFlows},
		{"reason_not_watched", 0, false, unwatchedDrop},
		{"not_a_first_packet", 0, false, confirmedFlow},
		{"first_packet_read", 0, false, newFlows},
		{"rate_limited", 1, false, newFlows},
	} {
		b.Run(c.name, func(b *testing.B) {
			ns, err := netns.New()
			if err != nil {
				b.Fatal(err)
			}
			defer ns.Close()
			snatlab.Run(ns, "nft", "add table inet bench")
			snatlab.Run(ns, "nft", "add chain inet bench out { type filter hook output priority 0; }")
			snatlab.Run(ns, "nft", "add rule inet bench out ct state new counter") // conntrack on in the netns, as on a node
			send := c.setup(b, ns)
			prog, stop := benchProgram(b, c.empty, c.rate)
			defer stop()
			before := progRunTime(b, prog)
			for b.Loop() {
				send()
			}
			after := progRunTime(b, prog)
			runs := after.runs - before.runs
			if runs > 0 {
				b.ReportMetric(float64(after.ns-before.ns)/float64(runs), "ns/run")
				b.ReportMetric(float64(runs)/float64(b.N), "runs/op")
			}
		})
	}
}

// benchProgram attaches the node drop program (reading its ring), or an
// empty one on the same tracepoint.
func benchProgram(b *testing.B, empty bool, rate float64) (*ebpf.Program, func()) {
	if empty {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "kfree_skb",
			License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
		if err != nil {
			b.Fatal(err)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			b.Fatal(err)
		}
		return p, func() { l.Close(); p.Close() }
	}
	nd, err := NewNodeDrops(NodeDropOptions{Rate: rate})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var r NodeDropRecord
		for nd.Read(&r) == nil {
		}
	}()
	return nd.Program(), func() { nd.Stop(); <-done; nd.Close() }
}

// A case sets up its netns and returns what one op sends there.
type benchCase func(b *testing.B, ns *netns.NS) (send func())

// unwatchedDrop: a UDP datagram to a port nothing listens on (NO_SOCKET).
func unwatchedDrop(b *testing.B, ns *netns.NS) func() {
	fd := udpSocket(b, ns)
	return func() { unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}) }
}

// confirmedFlow: datagrams of one UDP flow conntrack confirmed (its first
// went through), which a rule then drops: NETFILTER_DROP, no first packet.
func confirmedFlow(b *testing.B, ns *netns.NS) func() {
	fd := udpSocket(b, ns)
	to := &unix.SockaddrInet4{Port: 10, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Sendto(fd, []byte("x"), 0, to); err != nil {
		b.Fatal(err)
	}
	if out, err := snatlab.Run(ns, "nft", "add rule inet bench out udp dport 10 drop"); err != nil {
		b.Fatalf("nft: %v %s", err, out)
	}
	return func() { unix.Sendto(fd, []byte("x"), 0, to) }
}

// newFlows: a datagram from a new socket each time, which a rule drops:
// each is a new flow's first packet.
func newFlows(b *testing.B, ns *netns.NS) func() {
	if out, err := snatlab.Run(ns, "nft", "add rule inet bench out udp dport 11 drop"); err != nil {
		b.Fatalf("nft: %v %s", err, out)
	}
	to := &unix.SockaddrInet4{Port: 11, Addr: [4]byte{127, 0, 0, 1}}
	return func() {
		fd := udpSocket(b, ns)
		unix.Sendto(fd, []byte("x"), 0, to)
		unix.Close(fd)
	}
}

// udpSocket is a UDP socket of ns (a socket stays in the netns it was
// made in, whichever thread sends on it).
func udpSocket(b *testing.B, ns *netns.NS) (fd int) {
	err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return fd
}
