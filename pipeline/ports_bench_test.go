package pipeline

import (
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"syscall"
	"testing"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
)

// benchNode makes n netns with a process and conns connections in each
// toward a listener of its own (2*conns+1 TCP sockets a netns).
func benchNode(b *testing.B, n, conns int) map[uint64]int {
	testenv.RequireRoot(b)
	members := map[uint64]int{}
	for range n {
		ns, err := netns.New()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ns.Close() })
		l, err := ns.Listen("tcp4", "127.0.0.1:5000")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				b.Cleanup(func() { c.Close() })
			}
		}()
		for range conns {
			c, err := ns.Dial("tcp4", "127.0.0.1:5000")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
		}
		cmd := exec.Command("sleep", "3600")
		if err := ns.Start(cmd); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		members[ns.Inode()] = cmd.Process.Pid
	}
	return members
}

// benchSample times one full sample of the netns, with sock_diag or the
// BPF socket iterator; cpu-ns/op is the process's CPU time (getrusage).
func benchSample(b *testing.B, members map[uint64]int, iter netdiag.SocketReader, perNetNS, perSocket int) {
	s := newPortSampler(DefaultPortsInterval, DefaultPortsTop, 0, iter, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.members = func() (map[uint64]int, error) { return members, nil }
	var r0, r1 syscall.Rusage
	b.ReportAllocs()
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for range b.N {
		p, err := s.sample()
		if err != nil || p.Skipped != 0 || len(p.NetNS) != len(members) {
			b.Fatalf("sample: %v, %+v", err, p)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := float64((r1.Utime.Nano()+r1.Stime.Nano())-(r0.Utime.Nano()+r0.Stime.Nano())) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	b.ReportMetric(cpu/float64(perNetNS), "cpu-ns/netns")
	if perSocket > 0 {
		b.ReportMetric(cpu/float64(perSocket), "cpu-ns/socket")
	}
	b.ReportMetric(cpu/float64(DefaultPortsInterval.Nanoseconds())*100, "%core@15s")
}

// readers are the two socket readers a sample can use: sock_diag, and the
// BPF socket iterator when it loads.
func readers(b *testing.B) map[string]netdiag.SocketReader {
	out := map[string]netdiag.SocketReader{"sockdiag": nil}
	if it := OpenSockIter(slog.New(slog.NewTextHandler(io.Discard, nil))); it != nil {
		b.Cleanup(func() { it.Close() })
		out["bpfiter"] = it
	}
	return out
}

// BenchmarkPortSample: one sample of one netns, empty and with sockets:
// the cost per netns, and per socket from the slope (`make bench`).
func BenchmarkPortSample(b *testing.B) {
	for _, conns := range []int{0, 250, 1000} {
		members := benchNode(b, 1, conns)
		for name, iter := range readers(b) {
			b.Run(fmt.Sprintf("%s/sockets=%d", name, 2*conns+1), func(b *testing.B) {
				benchSample(b, members, iter, 1, 2*conns+1)
			})
		}
	}
}

// BenchmarkPortSampleNode: a node-like setup, 100 netns with 500 sockets
// each (250 connections, both ends, and the listener): one full sample.
// Not in `make bench` (it makes 25,000 connections); docs/performance.md.
func BenchmarkPortSampleNode(b *testing.B) {
	members := benchNode(b, 100, 250)
	for name, iter := range readers(b) {
		b.Run(name, func(b *testing.B) { benchSample(b, members, iter, 100, 100*501) })
	}
}
