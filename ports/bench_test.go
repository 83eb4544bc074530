package ports

import (
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/tracer"
)

// benchNode makes n netns, each with a process that holds conns
// connections toward a listener of its own (2*conns+2 TCP sockets a netns:
// both ends, the listener and a bound socket), the default range: a
// process a netns, so that no one process needs all the descriptors.
func benchNode(b *testing.B, n, conns int) []uint64 {
	var inodes []uint64
	for range n {
		inodes = append(inodes, newBusyNetNS(b, 32768, 60999, conns, 0, "").ns.Inode())
	}
	return inodes
}

// benchSample times one full sample of the netns given (the walk reads
// the whole node all the same); cpu-ns/op is the process's CPU time
// (getrusage: the walk runs in the kernel on eaddr's time).
func benchSample(b *testing.B, c Config, inodes []uint64, sockets int) {
	c.Only, c.Log = inodes, slog.New(slog.DiscardHandler)
	c.Audit.Top = benchTop
	s := New(c)
	b.Cleanup(s.Close)
	var r0, r1 syscall.Rusage
	b.ReportAllocs()
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for range b.N {
		p, err := s.Sample()
		if err != nil || p.Skipped != 0 || len(p.NetNS) != len(inodes) {
			b.Fatalf("sample: %v, %+v", err, p)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := float64((r1.Utime.Nano()+r1.Stime.Nano())-(r0.Utime.Nano()+r0.Stime.Nano())) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	b.ReportMetric(float64(r1.Stime.Nano()-r0.Stime.Nano())/float64(b.N), "sys-ns/op") // the kernel's part: walks and dumps
	b.ReportMetric(cpu/float64(len(inodes)), "cpu-ns/netns")
	b.ReportMetric(cpu/float64(sockets), "cpu-ns/socket")
	b.ReportMetric(cpu/float64(benchInterval.Nanoseconds())*100, "%core@15s")
}

// benchInterval and benchTop are the trace's --ports-interval and
// --ports-top defaults, against which the benchmarks state their share of
// a core.
const (
	benchInterval = 15 * time.Second
	benchTop      = 3
)

// readers are the ways a sample can read: the node walk, and each netns on
// its own with sock_diag (the sampler before the walk) or the BPF socket
// iterators.
func readers(b *testing.B) map[string]Config {
	out := map[string]Config{"walk": {}, "pernetns-sockdiag": {NoWalk: true}}
	if it, err := tracer.NewSockIter(); err == nil {
		b.Cleanup(func() { it.Close() })
		out["pernetns-bpfiter"] = Config{NoWalk: true, Audit: diagnose.AuditOptions{Iter: it}}
	}
	return out
}

// BenchmarkPortSample: one sample of one netns, empty and with sockets:
// the cost per netns, and per socket from the slope (`make bench`).
func BenchmarkPortSample(b *testing.B) {
	for _, conns := range []int{0, 250, 1000} {
		inodes := benchNode(b, 1, conns)
		for name, c := range readers(b) {
			b.Run(fmt.Sprintf("%s/sockets=%d", name, 2*conns+2), func(b *testing.B) { benchSample(b, c, inodes, 2*conns+2) })
		}
	}
}

// BenchmarkPortSampleNode: node-like setups, 100 netns with 500 sockets
// each and 250 netns with 200: one full sample, by the node walk and by
// each netns's own read side by side (pernetns-sockdiag is how the
// sampler before the walk read). `make bench` runs it, 3 samples each (it
// makes 50,000 connections and 350 processes); docs/performance.md.
func BenchmarkPortSampleNode(b *testing.B) {
	for _, node := range []struct{ netns, conns int }{{100, 249}, {250, 99}} {
		inodes := benchNode(b, node.netns, node.conns)
		sockets := node.netns * (2*node.conns + 2)
		for name, c := range readers(b) {
			b.Run(fmt.Sprintf("%dx%d/%s", node.netns, 2*node.conns+2, name), func(b *testing.B) { benchSample(b, c, inodes, sockets) })
		}
	}
}
