package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
)

// The storm section (issue 13): eaddr at its default flags while two threads
// fail connect() as fast as they can, next to no tracer and the floor, in
// alternating rounds. Today every failure crosses the ring buffer and is
// rate-limited in user space, so this is where eaddr costs most.

// stormThreads is the number of generator threads of the storm.
const stormThreads = 2

// stormArgs are eaddr's arguments in the storm: every flag at its default.
var stormArgs = []string{"trace"}

// stormGen is what the storm generator did.
type stormGen struct {
	failures, other uint64
	cpu             time.Duration // the generator threads' own CPU time, summed
	elapsed         time.Duration // wall time, first start to last end
}

func (g stormGen) rate() float64 { return float64(g.failures) / g.elapsed.Seconds() }

// nsPerCall is the generator threads' CPU time per failing call.
func (g stormGen) nsPerCall() float64 { return float64(g.cpu.Nanoseconds()) / float64(g.failures) }

// stormCfg is one configuration in one storm round.
type stormCfg struct {
	ok       bool
	gen      stormGen
	cpu      time.Duration // eaddr: user+sys during the storm
	hwm      int64         // eaddr: VmHWM after the storm, bytes
	kv       map[string]string
	stopNote string // eaddr: how it ended when not cleanly
}

type stormRound struct{ c [numCfg]stormCfg }

// stormGenerate fails connect() flat out from stormThreads threads in ns for
// d, each thread on one reused socket (as generate does), timing itself with
// its thread CPU clock.
func stormGenerate(ctx context.Context, ns *netns.NS, d time.Duration) (stormGen, error) {
	var mu sync.Mutex
	var g stormGen
	var wg sync.WaitGroup
	errs := make([]error, stormThreads)
	start := time.Now()
	for w := 0; w < stormThreads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = ns.Do(func() error {
				f, o, cpu, err := stormThread(ctx, d)
				mu.Lock()
				g.failures, g.other, g.cpu = g.failures+f, g.other+o, g.cpu+cpu
				mu.Unlock()
				return err
			})
		}()
	}
	wg.Wait()
	g.elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return g, err
	}
	if g.other > 0 {
		return g, fmt.Errorf("storm: %d connect() calls did not fail with EADDRNOTAVAIL", g.other)
	}
	return g, ctx.Err()
}

// stormThread is one generator thread; it must run inside the netns.
func stormThread(ctx context.Context, d time.Duration) (fails, other uint64, cpu time.Duration, err error) {
	sa := sockaddrIn4(8080)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("tcp socket: %w", err)
	}
	defer func() { unix.Close(fd) }()
	c0, t0 := threadCPU(), time.Now()
	for time.Since(t0) < d && ctx.Err() == nil {
		for i := 0; i < 256; i++ {
			_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
			if e == unix.EADDRNOTAVAIL {
				fails++
				continue
			}
			other++
			unix.Close(fd)
			if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return fails, other, threadCPU() - c0, fmt.Errorf("tcp socket: %w", err)
			}
		}
	}
	return fails, other, threadCPU() - c0, nil
}

// storm runs the storm section: -rounds rounds of none, floor and eaddr
// (rotating order), -storm-time each.
func (b *bench) storm(ctx context.Context) error {
	cfgs := []int{cfgNone, cfgFloor, cfgEaddr}
	for r := 0; r < b.o.rounds; r++ {
		if err := b.waitQuiet(ctx); err != nil {
			return err
		}
		sr := &stormRound{}
		b.stormRes = append(b.stormRes, sr)
		for i := range cfgs {
			c := cfgs[(r+i)%len(cfgs)]
			if err := b.stormOne(ctx, sr, r, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// stormOne is configuration c in one storm round.
func (b *bench) stormOne(ctx context.Context, sr *stormRound, round, c int) error {
	var s session = noneSession{}
	var err error
	switch c {
	case cfgFloor:
		s, err = startFloor()
	case cfgEaddr:
		s, err = startEaddr(ctx, b.o.eaddr, stormArgs, b.devnull)
	}
	if err != nil {
		return fmt.Errorf("storm round %d: %s: %w", round+1, cfgNames[c], err)
	}
	b.noteOwn(s)
	sc := &sr.c[c]
	pid := s.PID()
	var u0, s0 time.Duration
	if pid > 0 {
		u0, s0, _ = cpuTime(pid)
	}
	g, gerr := stormGenerate(ctx, b.ns, b.o.stormTime)
	if pid > 0 {
		u1, s1, err := cpuTime(pid)
		if err == nil {
			sc.cpu = u1 - u0 + s1 - s0
		}
		if hwm, err := vmHWM(pid); err == nil {
			sc.hwm = hwm
		}
	}
	t, serr := s.Stop()
	if gerr != nil {
		return gerr
	}
	if serr != nil {
		return fmt.Errorf("storm round %d: stopping %s: %w", round+1, cfgNames[c], serr)
	}
	sc.ok, sc.gen, sc.kv, sc.stopNote = true, g, t.KV, t.Exit
	msg := fmt.Sprintf("storm round %d %-6s %d failures in %v: %s/s, %.0f ns/call (generator thread CPU)",
		round+1, cfgNames[c], g.failures, g.elapsed.Round(time.Millisecond), rate(g.rate()), g.nsPerCall())
	if pid > 0 {
		msg += fmt.Sprintf("  eaddr cpu %v (%.0f ns/failure) rss %.1f MB  stopped: events=%s lost=%s written=%s suppressed=%s",
			sc.cpu, float64(sc.cpu.Nanoseconds())/float64(g.failures), float64(sc.hwm)/(1<<20),
			sc.kv["events"], sc.kv["lost"], sc.kv["written"], sc.kv["suppressed"])
	}
	b.logf("%s", msg)
	return nil
}

// stormMed is the median over storm rounds of f of configuration c.
func (b *bench) stormMed(c int, f func(stormCfg) float64) float64 {
	var v []float64
	for _, sr := range b.stormRes {
		if sr.c[c].ok {
			if x := f(sr.c[c]); !math.IsNaN(x) && !math.IsInf(x, 0) {
				v = append(v, x)
			}
		}
	}
	return median(v)
}
