//go:build linux

package tracer

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// What a suppressed failure costs (issue 24, item 6): one thread fails
// bind() on one socket, the same key every time, with the limit at
// trace's default (100/s), so all but ~100 failures a second take the
// limiter's fast path. Next to it, in alternating rounds, the floor: an
// empty program on sys_exit_bind. Reported, as medians over the rounds:
//
//   - bpf-ns/call: the program's own run time per failing call, from the
//     kernel's BPF statistics (on only while this benchmark runs);
//   - floor-bpf-ns/call: the same for the empty program;
//   - over-floor-ns/call: the whole bind() call with eaddr minus with the
//     floor (wall time, the 10% quantile over batches of 256 calls: noise
//     only adds time).
//
// Figures of one run compare with each other only; `-benchtime 1x` is enough
// (each round runs for a fixed time).
//
// Sub-benchmarks: bind, as above; connect, the storm's call (one thread,
// one reused socket, connect() to 127.0.0.1:8080 in a netns whose two local
// ports are taken: EADDRNOTAVAIL).
func BenchmarkSuppressedPath(b *testing.B) {
	testenv.RequireRoot(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF statistics: %v", err)
	}
	defer stats.Close()
	b.Run("bind", func(b *testing.B) { suppressedRounds(b, SysBind, bindLoop) })
	b.Run("connect", func(b *testing.B) {
		ns, err := netns.New()
		if err != nil {
			b.Fatal(err)
		}
		defer ns.Close()
		ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
		if err != nil {
			b.Fatal(err)
		}
		defer ex.Close()
		suppressedRounds(b, SysConnect, func(b *testing.B, p *ebpf.Program) (r suppressedRun) {
			if err := ns.Do(func() error { r = connectLoop(b, p); return nil }); err != nil {
				b.Fatal(err)
			}
			return r
		})
	})
}

// suppressedRounds alternates eaddr and the floor on syscall sys, loop
// making the failures.
func suppressedRounds(b *testing.B, sys uint8, loop func(*testing.B, *ebpf.Program) suppressedRun) {
	const rounds = 7
	var bpfNs, floorNs, over []float64
	for range b.N {
		for r := range rounds {
			var e, f suppressedRun
			if r%2 == 0 {
				f, e = suppressedFloor(b, sys, loop), suppressedEaddr(b, sys, loop)
			} else {
				e, f = suppressedEaddr(b, sys, loop), suppressedFloor(b, sys, loop)
			}
			bpfNs, floorNs, over = append(bpfNs, e.bpf), append(floorNs, f.bpf), append(over, e.call-f.call)
		}
	}
	b.ReportMetric(medianOf(bpfNs), "bpf-ns/call")
	b.ReportMetric(medianOf(floorNs), "floor-bpf-ns/call")
	b.ReportMetric(medianOf(over), "over-floor-ns/call")
	b.ReportMetric(0, "ns/op")
}

type suppressedRun struct{ bpf, call float64 }

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// suppressedEaddr is one round with eaddr at the default limit.
func suppressedEaddr(b *testing.B, sys uint8, loop func(*testing.B, *ebpf.Program) suppressedRun) suppressedRun {
	tr, err := New(Options{Rate: 100, WakeupBytes: 1 << 20, Syscalls: []uint8{sys}})
	if err != nil {
		b.Fatalf("New: %+v", err)
	}
	defer tr.Close()
	if sys == SysConnect {
		return loop(b, tr.objs.ExitConnect)
	}
	return loop(b, tr.objs.ExitBind)
}

// suppressedFloor is one round with the empty program.
func suppressedFloor(b *testing.B, sys uint8, loop func(*testing.B, *ebpf.Program) suppressedRun) suppressedRun {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	tp := "sys_exit_bind"
	if sys == SysConnect {
		tp = "sys_exit_connect"
	}
	l, err := link.Tracepoint("syscalls", tp, prog, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return loop(b, prog)
}

// bindLoop fails bind() for 300 ms and returns prog's run time per call
// and the call's time.
func bindLoop(b *testing.B, prog *ebpf.Program) suppressedRun {
	sa := &unix.SockaddrInet4{Port: 4242, Addr: [4]byte{198, 18, 0, 1}}
	return callLoop(b, prog, func(fd int) error { return unix.Bind(fd, sa) })
}

// connectLoop is bindLoop for connect() to 127.0.0.1:8080, in the
// exhausted netns.
func connectLoop(b *testing.B, prog *ebpf.Program) suppressedRun {
	sa := &unix.SockaddrInet4{Port: 8080, Addr: [4]byte{127, 0, 0, 1}}
	return callLoop(b, prog, func(fd int) error { return unix.Connect(fd, sa) })
}

// callLoop makes call fail with EADDRNOTAVAIL on one socket for 300 ms.
func callLoop(b *testing.B, prog *ebpf.Program, call func(fd int) error) suppressedRun {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	rt0, n0 := progRun(b, prog)
	var batches []float64
	calls := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		t0 := time.Now()
		for range 256 {
			if err := call(fd); !errors.Is(err, unix.EADDRNOTAVAIL) {
				b.Fatalf("%v, want EADDRNOTAVAIL", err)
			}
		}
		batches = append(batches, float64(time.Since(t0).Nanoseconds())/256)
		calls += 256
	}
	rt1, n1 := progRun(b, prog)
	if n1-n0 < uint64(calls) {
		b.Fatalf("the program ran %d times for %d calls", n1-n0, calls)
	}
	slices.Sort(batches)
	return suppressedRun{bpf: float64((rt1 - rt0).Nanoseconds()) / float64(n1-n0), call: batches[len(batches)/10]}
}

func progRun(b *testing.B, prog *ebpf.Program) (time.Duration, uint64) {
	st, err := prog.Stats()
	if err != nil {
		b.Fatalf("BPF run-time statistics: %v", err)
	}
	return st.Runtime, st.RunCount
}
