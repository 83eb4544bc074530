package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
)

// The workloads. Every loop runs on a goroutine locked to its OS thread and
// calls the kernel with unix.RawSyscall: no Go scheduler hooks around the
// syscall, so the figures are the kernel's (plus a loop iteration).

// sockaddrIn4 builds a struct sockaddr_in for 127.0.0.1:port.
func sockaddrIn4(port int) unix.RawSockaddrInet4 {
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port) // network byte order
	return sa
}

// onThread runs fn on a fresh goroutine locked to its OS thread.
func onThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ch <- fn()
	}()
	return <-ch
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID): time
// in user and kernel mode, interrupts served meanwhile included (this
// kernel has no IRQ_TIME_ACCOUNTING), time spent preempted excluded. On a
// shared, overcommitted VM a wall clock around a loop mostly measures the
// other tenants; this clock measures what the calls cost the caller.
func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// timedBatches calls batch(n) until d of wall time has passed (at least
// three times) and returns a low quantile q (see -batch-quantile) over the
// batches of the thread CPU time per call, in ns. batch runs n calls and
// lasts a few ms. Noise on a shared host only ever adds time: the host
// descheduling this vCPU (which the guest's clocks cannot tell from running:
// this VM reports no steal time), other tenants thrashing caches and memory
// bandwidth, interrupts. A low quantile of many short batches is what the
// calls cost when the host leaves them alone; the median over rounds is
// then taken on top.
func timedBatches(ctx context.Context, d time.Duration, q float64, n int, batch func(n int) error) (float64, error) {
	var per []float64
	start := time.Now()
	for time.Since(start) < d || len(per) < 3 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t0 := threadCPU()
		if err := batch(n); err != nil {
			return 0, err
		}
		per = append(per, float64((threadCPU()-t0).Nanoseconds())/float64(n))
	}
	return quantile(per, q), nil
}

// udpConnect: connect() of one UDP socket to 127.0.0.1:9, over and over. A
// UDP connect only sets the default destination: no packet is sent.
func udpConnect(ctx context.Context, d time.Duration, q float64) (float64, error) {
	var ns float64
	err := onThread(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("udp socket: %w", err)
		}
		defer unix.Close(fd)
		sa := sockaddrIn4(9)
		ns, err = timedBatches(ctx, d, q, 2000, func(n int) error {
			for i := 0; i < n; i++ {
				_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
				if e != 0 {
					return fmt.Errorf("udp connect 127.0.0.1:9: %w", e)
				}
			}
			return nil
		})
		return err
	})
	return ns, err
}

// getppid: a syscall no tracer here looks at.
func getppid(ctx context.Context, d time.Duration, q float64) (float64, error) {
	var ns float64
	err := onThread(func() error {
		var err error
		ns, err = timedBatches(ctx, d, q, 4000, func(n int) error {
			for i := 0; i < n; i++ {
				unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
			}
			return nil
		})
		return err
	})
	return ns, err
}

// failingConnect returns the cost of connect() in ns, whose port range is
// exhausted: each connect fails with EADDRNOTAVAIL, each on a new socket.
// Batches of socket+connect+close alternate with batches of socket+close
// (the baseline) under the same configuration, both timed with the thread
// CPU clock; connect() alone is the difference of the two per-call costs,
// each taken as the quantile q over its batches (see timedBatches). The
// baseline carries what a tracer adds to socket() and close() (the syscall
// slow path), so the difference is the connect() call with its own
// tracepoint, program and wakeups. It also returns how many failing calls it
// made.
func failingConnect(ctx context.Context, ns *netns.NS, d time.Duration, q float64) (float64, int, error) {
	var res float64
	var calls int
	err := ns.Do(func() error {
		sa := sockaddrIn4(8080)
		const n = 200
		var full, base []float64
		start := time.Now()
		for time.Since(start) < d || len(full) < 3 {
			if err := ctx.Err(); err != nil {
				return err
			}
			t0 := threadCPU()
			for i := 0; i < n; i++ {
				e, err := failConnect(&sa)
				if err != nil {
					return err
				}
				if e != unix.EADDRNOTAVAIL {
					return fmt.Errorf("connect 127.0.0.1:8080 in the exhausted netns: got %v, want EADDRNOTAVAIL", e)
				}
			}
			calls += n
			t1 := threadCPU()
			for i := 0; i < n; i++ {
				fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if e != 0 {
					return fmt.Errorf("tcp socket: %w", e)
				}
				unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
			}
			t2 := threadCPU()
			full = append(full, float64((t1-t0).Nanoseconds())/n)
			base = append(base, float64((t2-t1).Nanoseconds())/n)
		}
		res = quantile(full, q) - quantile(base, q)
		return nil
	})
	return res, calls, err
}

// failConnect is one failing call in the exhausted netns: socket, connect
// (EADDRNOTAVAIL), close. It must run on a thread inside the netns.
func failConnect(sa *unix.RawSockaddrInet4) (unix.Errno, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return 0, fmt.Errorf("tcp socket: %w", e)
	}
	_, _, ce := unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(sa)), unsafe.Sizeof(*sa))
	unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	return ce, nil
}

// genResult is what a failure generator achieved.
type genResult struct {
	Failures uint64        // connect() calls that failed with EADDRNOTAVAIL
	Other    uint64        // calls that did something else (never expected)
	Elapsed  time.Duration // from the first to the last worker's end
	HostBusy float64       // share of all CPUs busy during the run, 0..1 (/proc/stat)
}

// Rate is failures per second.
func (g genResult) Rate() float64 {
	if g.Elapsed <= 0 {
		return 0
	}
	return float64(g.Failures) / g.Elapsed.Seconds()
}

// generate makes failing connect() calls in ns from workers threads for d,
// at rate calls/s in total (0: as fast as they can). Each worker paces itself
// against its own clock, in batches of at least a millisecond's worth.
//
// Each worker reuses one TCP socket: a connect() that fails with
// EADDRNOTAVAIL leaves the socket unbound and closed, ready for the next one.
// That is a third of the syscalls of socket+connect+close, so the generator
// reaches a rate that stresses the tracer rather than itself; the tracer sees
// the same failure either way.
func generate(ctx context.Context, ns *netns.NS, workers int, rate float64, d time.Duration) (genResult, error) {
	if workers < 1 {
		workers = 1
	}
	var fails, other atomic.Uint64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	busy0, _ := readCPUBusy()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = ns.Do(func() error {
				sa := sockaddrIn4(8080)
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return fmt.Errorf("tcp socket: %w", err)
				}
				defer func() { unix.Close(fd) }()
				perWorker := rate / float64(workers)
				var done, f, o uint64
				defer func() { fails.Add(f); other.Add(o) }()
				t0 := time.Now()
				for {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					el := time.Since(t0)
					if el >= d {
						return nil
					}
					target := done + 64
					if perWorker > 0 {
						target = uint64(perWorker * el.Seconds())
						if target <= done {
							// Ahead of schedule: sleep until the next call is
							// due, but at least 1ms (batches, not a wakeup per call).
							next := time.Duration(float64(done+1) / perWorker * float64(time.Second))
							time.Sleep(max(next-el, time.Millisecond))
							continue
						}
						if target-done > 4096 { // far behind: catch up gradually
							target = done + 4096
						}
					}
					for ; done < target; done++ {
						_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
						if e == unix.EADDRNOTAVAIL {
							f++
							continue
						}
						// Not the expected failure: start over with a new socket.
						o++
						unix.Close(fd)
						if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
							return fmt.Errorf("tcp socket: %w", err)
						}
					}
				}
			})
		}()
	}
	wg.Wait()
	el := time.Since(start)
	busy1, _ := readCPUBusy()
	res := genResult{Failures: fails.Load(), Other: other.Load(), Elapsed: el, HostBusy: busy1.since(busy0)}
	if err := errors.Join(errs...); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, ctx.Err()
}

// loopCalls runs the success or failing workload for d and returns how many
// calls it made (for the BPF run-time statistics).
func loopCalls(ctx context.Context, ns *netns.NS, kind string, d time.Duration) (int, error) {
	var calls int
	switch kind {
	case "success":
		err := onThread(func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			sa := sockaddrIn4(9)
			for start := time.Now(); time.Since(start) < d && ctx.Err() == nil; {
				for i := 0; i < 1000; i++ {
					unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
				}
				calls += 1000
			}
			return ctx.Err()
		})
		return calls, err
	case "failing":
		err := ns.Do(func() error {
			sa := sockaddrIn4(8080)
			for start := time.Now(); time.Since(start) < d && ctx.Err() == nil; {
				for i := 0; i < 200; i++ {
					if _, err := failConnect(&sa); err != nil {
						return err
					}
				}
				calls += 200
			}
			return ctx.Err()
		})
		return calls, err
	}
	return 0, fmt.Errorf("unknown workload %q", kind)
}
