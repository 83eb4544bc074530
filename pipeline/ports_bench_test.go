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
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// benchNode makes n netns, each with a process that holds conns
// connections toward a listener of its own (2*conns+1 TCP sockets a netns):
// a process a netns, so that no one process needs all the descriptors.
func benchNode(b *testing.B, n, conns int) map[uint64]int {
	testenv.RequireRoot(b)
	members := map[uint64]int{}
	script := fmt.Sprintf(`import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 5000)); l.listen(4096)
cs = [socket.create_connection(("127.0.0.1", 5000)) for _ in range(%d)]
ss = [l.accept()[0] for _ in range(%d)]
print("ready", flush=True)
sys.stdin.read()
`, conns, conns)
	for range n {
		ns, err := netns.New()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ns.Close() })
		cmd := exec.Command("python3", "-c", script)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := ns.Start(cmd); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
		line := make([]byte, 6)
		if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
			b.Fatalf("python in %v: %q %v", ns, line, err)
		}
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
	b.ReportMetric(float64(r1.Stime.Nano()-r0.Stime.Nano())/float64(b.N), "sys-ns/op") // the kernel's part: the dumps
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
