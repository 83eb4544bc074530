// Command eaddr-bench measures what eaddr costs, next to no tracer, an empty
// BPF program on the same tracepoints (the floor) and the equivalent bpftrace
// script (bench/eaddr.bt). `make bench` runs it as root and prints a table;
// docs/performance.md explains the rows and has the figures of a run.
//
// Configurations are measured alternately, round after round (the order
// rotates), and every figure is the median over the rounds: the machine is
// assumed shared and noisy, so only side-by-side figures of one run are
// compared.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
)

// Configurations, in table order.
const (
	cfgNone = iota
	cfgFloor
	cfgEaddr
	cfgBpftrace
	numCfg
)

var cfgNames = [numCfg]string{"none", "floor", "eaddr", "bpftrace"}

type options struct {
	rounds       int
	micro        time.Duration
	cpuTime      time.Duration
	cpuRates     []float64
	workers      int
	sustainStep  time.Duration
	sustainRates []float64
	refine       int
	skipSustain  bool
	quietWait    time.Duration
	bpfStats     bool
	extraRounds  int
	eaddr        string
	eaddrArgs    []string
	sustainArgs  []string
	bpftrace     string
	script       string
	goTool       string
	goBench      bool
	genRate      float64
	batchQ       float64
	genFor       time.Duration
	storm        bool
	latency      bool
	stormTime    time.Duration
	perEvent     bool
	perEventArgs []string
	perEventTime time.Duration
	base         string
}

func main() {
	var o options
	var cpuRates, sustainRates, eaddrArgs, sustainArgs, perEventArgs string
	flag.IntVar(&o.rounds, "rounds", 5, "rounds: every configuration is measured once per round, in rotating order; figures are medians over rounds")
	flag.DurationVar(&o.micro, "micro", 300*time.Millisecond, "how long each per-call loop (success, failing, getppid) runs per configuration and round")
	flag.Float64Var(&o.batchQ, "batch-quantile", 0.1, "per-call loops run in batches of a few ms; a round's figure is this quantile over the batches (noise only adds time; 0.5 is the median)")
	flag.DurationVar(&o.cpuTime, "cpu-time", 2*time.Second, "how long each CPU% measurement runs per round (eaddr and bpftrace)")
	flag.StringVar(&cpuRates, "cpu-rates", "10000,100000", "failure rates (per second) at which the tracer's CPU% is measured")
	flag.IntVar(&o.workers, "workers", 2*runtime.NumCPU(), "threads making failing connect() calls for the rate-driven rows (spread over all CPUs)")
	flag.DurationVar(&o.sustainStep, "sustain-step", 1500*time.Millisecond, "how long each step of the zero-loss search runs")
	flag.StringVar(&sustainRates, "sustain-rates", "50000,100000,150000,200000,250000,300000,400000,500000,700000", "the rates (failures/s) the zero-loss search climbs, until a step loses events or the generator cannot go faster")
	flag.IntVar(&o.refine, "sustain-refine", 2, "bisection steps between the last step without loss and the first with loss")
	flag.BoolVar(&o.bpfStats, "bpf-stats", true, "in each round, after the other measurements, time the BPF programs themselves per call with the kernel's BPF statistics (enabled only meanwhile)")
	flag.BoolVar(&o.skipSustain, "skip-sustain", false, "skip the zero-loss search")
	flag.DurationVar(&o.quietWait, "quiet-wait", 5*time.Second, "before each round and search step, wait up to this long for other BPF tracing programs (another tracer on the host) to go away")
	flag.IntVar(&o.extraRounds, "extra-rounds", 3, "rounds run in addition to -rounds when some were disturbed by another tracer; medians use the undisturbed rounds when there are any")
	flag.StringVar(&o.eaddr, "eaddr", "bin/eaddr", "the eaddr binary (make bench builds it first)")
	flag.StringVar(&eaddrArgs, "eaddr-args", "trace --explain short", "eaddr's arguments; stdout goes to /dev/null")
	flag.StringVar(&sustainArgs, "sustain-args", "trace", "eaddr's arguments in the zero-loss search (default: every flag at its default)")
	flag.StringVar(&o.bpftrace, "bpftrace", "bpftrace", "the bpftrace binary; its column says 'bpftrace not installed' when it is not found")
	flag.StringVar(&o.script, "script", "bench/eaddr.bt", "the bpftrace script equivalent to eaddr's kernel side")
	flag.StringVar(&o.goTool, "go", "go", "the go command, for the per-event user-space benchmark (empty: skip it)")
	flag.BoolVar(&o.goBench, "gobench", true, "run the Go benchmarks: user-space cost per event (./output BenchmarkEventJSON, ./pipeline BenchmarkSteadyEvent), what naming a cgroup costs (./decode BenchmarkCgroupPath, ./tracer BenchmarkCgroupRecord and BenchmarkLookupCgroup), and one port sample (./ports BenchmarkPortSample, and BenchmarkPortSampleNode: 100 netns x 500 sockets and 250 x 200, the node walk beside each netns read on its own)")
	flag.BoolVar(&o.storm, "storm", true, "after the rounds, the storm section: eaddr at default flags (trace) against no tracer and the floor while two threads fail connect() flat out, -rounds times, with its own targets table")
	flag.BoolVar(&o.latency, "latency", true, "after the storm, the latency section: how long after its failure an event's line reaches eaddr's stdout, with a CRI socket that never answers and a storm from a pod cgroup, -rounds times, with eaddr's own record of its waits")
	flag.DurationVar(&o.stormTime, "storm-time", 3*time.Second, "how long each storm measurement runs per configuration and round")
	flag.BoolVar(&o.perEvent, "per-event", true, "the per-event section (issue 24): eaddr with every failure an event (-per-event-args), stdout a pipe this driver drains, user and sys CPU per line and % of a core at each -cpu-rates entry, -rounds times, and the zero-loss search (unless -skip-sustain); beside -base's binary when given")
	flag.StringVar(&perEventArgs, "per-event-args", "trace --rate-limit off", "eaddr's arguments in the per-event section; --netns with the bench netns's inode is added")
	flag.DurationVar(&o.perEventTime, "per-event-time", 3*time.Second, "how long each per-event measurement runs per binary, rate and round")
	flag.StringVar(&o.base, "base", "", "a git revision (e.g. 37cdb5e): the per-event section also measures bin/eaddr built at it (in a temporary git worktree, removed after the build), alternating with -eaddr, and gives new/base")
	flag.Float64Var(&o.genRate, "generate", -1, "only generate failing connect() calls at this rate (0: as fast as possible) in a throwaway exhausted netns for -for, e.g. to profile a tracer by hand; no table")
	flag.DurationVar(&o.genFor, "for", 10*time.Second, "with -generate: for how long")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: eaddr-bench [flags]   (as root, from the repository root; `sudo make bench`)\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if o.cpuRates, err = parseRates(cpuRates); err != nil {
		fatalf("-cpu-rates: %v", err)
	}
	if o.sustainRates, err = parseRates(sustainRates); err != nil {
		fatalf("-sustain-rates: %v", err)
	}
	o.eaddrArgs = strings.Fields(eaddrArgs)
	o.sustainArgs = strings.Fields(sustainArgs)
	o.perEventArgs = strings.Fields(perEventArgs)
	if o.rounds < 1 {
		fatalf("-rounds must be at least 1")
	}
	if o.batchQ < 0 || o.batchQ > 1 {
		fatalf("-batch-quantile must be within 0..1")
	}

	// The first SIGINT/SIGTERM cancels ctx: loops return, tracers are stopped,
	// the netns is closed. A second one exits at once (children die with us:
	// pdeath.Start).
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "eaddr-bench: interrupted, cleaning up (again to exit at once)")
		cancel()
		<-sig
		os.Exit(130)
	}()

	err = run(ctx, o)
	cancel()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "eaddr-bench: interrupted")
			os.Exit(130)
		}
		fatalf("%v", err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "eaddr-bench: "+format+"\n", a...)
	os.Exit(1)
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(f, &v); err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive rate", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// bench holds the whole run's state and results.
type bench struct {
	o          options
	ns         *netns.NS
	devnull    *os.File
	have       [numCfg]bool
	missing    [numCfg]string // why a configuration is not measured
	res        results
	stormRes   []*stormRound           // the storm section, one per round
	latencyRes []*latencyRound         // the latency section, one per round
	pe         *peState                // the per-event section; nil when not run
	own        map[ebpf.ProgramID]bool // this driver's programs (floor, its eaddr's and bpftrace's)
	logf       func(format string, a ...any)
}

func run(ctx context.Context, o options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (BPF, network namespaces): sudo make bench")
	}
	b := &bench{o: o, res: newResults(o), own: map[ebpf.ProgramID]bool{}}
	b.logf = func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	for c := range b.have {
		b.have[c] = true
	}
	if _, err := os.Stat(o.eaddr); err != nil {
		b.have[cfgEaddr], b.missing[cfgEaddr] = false, fmt.Sprintf("eaddr binary %s not found (make build)", o.eaddr)
	}
	if p, err := exec.LookPath(o.bpftrace); err != nil {
		b.have[cfgBpftrace], b.missing[cfgBpftrace] = false, "bpftrace not installed"
	} else {
		b.o.bpftrace = p
		if _, err := os.Stat(o.script); err != nil {
			b.have[cfgBpftrace], b.missing[cfgBpftrace] = false, fmt.Sprintf("bpftrace script %s not found", o.script)
		}
	}
	for c := range b.have {
		if !b.have[c] {
			b.logf("%s: not measured: %s", cfgNames[c], b.missing[c])
		}
	}

	var err error
	if b.devnull, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
		return err
	}
	defer b.devnull.Close()

	// The per-event user-space benchmark first, with nothing else running.
	if o.goBench && o.goTool != "" && o.genRate < 0 {
		b.logf("go test -run XXX -bench ... ./decode ./tracer")
		b.res.goBench, b.res.goBenchErr = runGoBench(ctx, o.goTool)
		if b.res.goBenchErr != nil {
			b.logf("go benchmark: %v", b.res.goBenchErr)
		}
		if o.perEvent {
			st := runSteadyTest(ctx, o.goTool)
			b.res.steadyTest = &st
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	if o.genRate < 0 && o.perEvent && b.have[cfgEaddr] {
		remove, err := b.setupPerEvent(ctx)
		if err != nil {
			return err
		}
		defer remove()
	}

	// The netns whose two-port range is exhausted toward 127.0.0.1:8080.
	b.logf("creating the netns with an exhausted port range (40000-40001 toward 127.0.0.1:8080)")
	if b.ns, err = netns.New(); err != nil {
		return err
	}
	defer b.ns.Close()
	ex, err := netns.Exhaust(b.ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
	if err != nil {
		return err
	}
	defer ex.Close()
	if o.genRate >= 0 {
		b.logf("generating failing connect() calls at %s/s (0: unlimited) for %v from %d threads", rate(o.genRate), o.genFor, o.workers)
		g, err := generate(ctx, b.ns, o.workers, o.genRate, o.genFor)
		b.logf("%d failures in %v: %.0f/s (%d other results); host CPUs %.0f%% busy", g.Failures, g.Elapsed.Round(time.Millisecond), g.Rate(), g.Other, 100*g.HostBusy)
		return err
	}

	start := time.Now()
	clean := 0
	for r := 0; clean < o.rounds && r < o.rounds+o.extraRounds; r++ {
		if err := b.waitQuiet(ctx); err != nil {
			return err
		}
		rr := newRound(len(o.cpuRates))
		b.res.rounds = append(b.res.rounds, rr)
		for i := 0; i < numCfg; i++ {
			c := (r + i) % numCfg // rotate: each configuration goes first once in a while
			if !b.have[c] {
				continue
			}
			if err := b.measure(ctx, rr, r, c); err != nil {
				return err
			}
		}
		if rr.clean {
			clean++
		} else {
			b.logf("round %d was disturbed by another tracer: %s", r+1, strings.Join(rr.foreign, "; "))
		}
	}
	b.logf("%d rounds (%d undisturbed) in %v", len(b.res.rounds), clean, time.Since(start).Round(time.Second))

	if !o.skipSustain {
		for c := 0; c < numCfg; c++ {
			if !b.have[c] {
				continue
			}
			if err := b.sustain(ctx, c); err != nil {
				return err
			}
		}
	}
	if b.pe != nil {
		if err := b.perEvent(ctx); err != nil {
			return err
		}
	}
	if o.storm && b.have[cfgEaddr] {
		if err := b.storm(ctx); err != nil {
			return err
		}
	}
	if o.latency && b.have[cfgEaddr] {
		if err := b.latency(ctx); err != nil {
			return err
		}
	}
	b.res.wall = time.Since(start)
	b.report(os.Stdout)
	if b.pe != nil {
		b.reportPerEvent(os.Stdout)
	}
	if o.storm {
		b.reportStorm(os.Stdout)
	}
	if o.latency && b.have[cfgEaddr] {
		b.reportLatency(os.Stdout)
	}
	return nil
}

// startCfg attaches configuration c.
func (b *bench) startCfg(ctx context.Context, c int) (session, error) {
	switch c {
	case cfgFloor:
		return startFloor()
	case cfgEaddr:
		return startEaddr(ctx, b.o.eaddr, b.o.eaddrArgs, b.devnull)
	case cfgBpftrace:
		return startBpftrace(ctx, b.o.bpftrace, b.o.script)
	}
	return noneSession{}, nil
}

// noteOwn remembers the BPF programs of session s as this driver's, so that
// the check for other tracers ignores them (a program outlives its last file
// descriptor for a moment).
func (b *bench) noteOwn(s session) {
	if fs, ok := s.(*floorSession); ok {
		if info, err := fs.prog.Info(); err == nil {
			if id, ok := info.ID(); ok {
				b.own[id] = true
			}
		}
		return
	}
	if pid := s.PID(); pid > 0 {
		if ids, _, err := bpfObjects(pid); err == nil {
			for _, id := range ids {
				b.own[id] = true
			}
		}
	}
}

// waitQuiet waits up to -quiet-wait for no other BPF tracing program to be
// loaded. It returns without error when they stay: the measurement is then
// marked as disturbed.
func (b *bench) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(b.o.quietWait)
	logged := false
	for {
		fr, err := foreignTracers(b.own)
		if err != nil || len(fr) == 0 || time.Now().After(deadline) {
			return nil
		}
		if !logged {
			b.logf("waiting up to %v for other tracers to go away: %s", b.o.quietWait, strings.Join(fr, " "))
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkForeign marks rr disturbed when another tracer's programs are loaded.
func (b *bench) checkForeign(rr *roundRes, when string) {
	if fr, err := foreignTracers(b.own); err == nil && len(fr) > 0 {
		rr.clean = false
		rr.foreign = append(rr.foreign, when+": "+strings.Join(fr, " "))
	}
}

// measure is one round of configuration c: attach, the per-call loops, the
// CPU% at each rate, RSS, detach.
func (b *bench) measure(ctx context.Context, rr *roundRes, round, c int) error {
	name := cfgNames[c]
	b.checkForeign(rr, "before "+name)
	s, err := b.startCfg(ctx, c)
	if err != nil {
		return fmt.Errorf("round %d: %s: %w", round+1, name, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()
	b.noteOwn(s)
	r := &b.res
	if c != cfgNone {
		rr.v[rowAttach][c] = float64(s.Attach().Microseconds()) / 1000
	}
	v, err := udpConnect(ctx, b.o.micro, b.o.batchQ)
	if err != nil {
		return err
	}
	rr.v[rowSuccess][c] = v
	var lost func() uint64 // eaddr's kernel drop counter, read directly
	if c == cfgEaddr {
		lost = lostReader(s.PID())
	}
	var l0 uint64
	if lost != nil {
		l0 = lost()
	}
	var ours uint64 // failures this driver made while c was attached
	v, n, err := failingConnect(ctx, b.ns, b.o.micro, b.o.batchQ)
	if err != nil {
		return err
	}
	ours += uint64(n)
	rr.v[rowFailing][c] = v
	if lost != nil {
		rr.failLost[c] = lost() - l0
	}
	v, err = getppid(ctx, b.o.micro, b.o.batchQ)
	if err != nil {
		return err
	}
	rr.v[rowGetppid][c] = v
	msg := fmt.Sprintf("round %d %-8s success %6.0f ns  failing %6.0f ns  getppid %5.0f ns", round+1, name,
		rr.v[rowSuccess][c], rr.v[rowFailing][c], rr.v[rowGetppid][c])
	if pid := s.PID(); pid > 0 {
		for i, rate := range b.o.cpuRates {
			u0, s0, err := cpuTime(pid)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if lost != nil {
				l0 = lost()
			}
			g, err := generate(ctx, b.ns, b.o.workers, rate, b.o.cpuTime)
			if err != nil {
				return err
			}
			ours += g.Failures
			u1, s1, err := cpuTime(pid)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			el := g.Elapsed.Seconds()
			cs := cpuSample{ok: true, rate: g.Rate(),
				user: 100 * (u1 - u0).Seconds() / el, sys: 100 * (s1 - s0).Seconds() / el}
			cs.pct = cs.user + cs.sys
			if lost != nil {
				cs.lost, cs.hasLost = lost()-l0, true
			}
			rr.cpu[i][c] = cs
			msg += fmt.Sprintf("  cpu %.1f%% (%.1f user) @ %.0f/s", cs.pct, cs.user, cs.rate)
			if cs.hasLost {
				msg += fmt.Sprintf(" lost %d", cs.lost)
			}
		}
		if hwm, err := vmHWM(pid); err == nil {
			rr.v[rowRSS][c] = float64(hwm) / (1 << 20)
			msg += fmt.Sprintf("  rss %.1f MB", float64(hwm)/(1<<20))
		}
		msg += fmt.Sprintf("  attached %.0f ms", s.Attach().Seconds()*1000)
	}
	if c != cfgNone && b.o.bpfStats {
		m, n, err := b.bpfStats(ctx, rr, c, s)
		if err != nil {
			return err
		}
		ours += uint64(n)
		msg += m
	}
	stopped = true
	t, err := s.Stop()
	if err != nil {
		return fmt.Errorf("round %d: stopping %s: %w", round+1, name, err)
	}
	if t.Exit != "" {
		r.notes = append(r.notes, fmt.Sprintf("round %d: %s: %s", round+1, name, t.Exit))
	}
	if t.Known {
		r.roundLost[c] += t.Lost
		r.roundEvents[c] += t.Events
		r.roundOurs[c] += ours
		msg += fmt.Sprintf("  events %d (ours %d) lost %d", t.Events, ours, t.Lost)
	}
	b.checkForeign(rr, "after "+name)
	b.logf("%s", msg)
	return nil
}

// sustain finds the highest failure rate at which configuration c loses no
// event. For none and floor, which have nothing to lose, it measures the
// generator's own ceiling instead.
func (b *bench) sustain(ctx context.Context, c int) error {
	name := cfgNames[c]
	sr := &b.res.sustain[c]
	if c == cfgNone || c == cfgFloor {
		if err := b.waitQuiet(ctx); err != nil {
			return err
		}
		s, err := b.startCfg(ctx, c)
		if err != nil {
			return err
		}
		g, err := generate(ctx, b.ns, b.o.workers, 0, b.o.sustainStep)
		s.Stop()
		if err != nil {
			return err
		}
		sr.ceiling, sr.busy = g.Rate(), g.HostBusy
		b.logf("sustain %-8s generator ceiling %.0f failures/s (host CPUs %.0f%% busy)", name, g.Rate(), 100*g.HostBusy)
		return nil
	}
	start := func() (session, error) {
		if c == cfgEaddr {
			return startEaddr(ctx, b.o.eaddr, b.o.sustainArgs, b.devnull)
		}
		return b.startCfg(ctx, c)
	}
	l := newLadder(b.o.sustainRates, b.o.refine, sr)
	for rate, more := l.next(); more; rate, more = l.next() {
		ok, g, err := b.sustainStep(ctx, name, start, sr, rate, func(t totals) uint64 { return t.Lost })
		if err != nil {
			return err
		}
		l.record(rate, ok, g.Rate())
	}
	return nil
}

// sustainStep is one step of a zero-loss search: a fresh tracer from start
// while the generator runs at rate for -sustain-step. ok: loss(its totals)
// is 0. The step is recorded in sr, and sr.best raised when ok.
func (b *bench) sustainStep(ctx context.Context, name string, start func() (session, error), sr *sustainResult, rate float64, loss func(totals) uint64) (ok bool, g genResult, err error) {
	if err := b.waitQuiet(ctx); err != nil {
		return false, g, err
	}
	fr, _ := foreignTracers(b.own)
	s, err := start()
	if err != nil {
		return false, g, err
	}
	b.noteOwn(s)
	g, err = generate(ctx, b.ns, b.o.workers, rate, b.o.sustainStep)
	if err != nil {
		s.Stop()
		return false, g, err
	}
	t, err := s.Stop()
	if err != nil {
		return false, g, err
	}
	if !t.Known {
		return false, g, fmt.Errorf("%s reported no totals", name)
	}
	lost := loss(t)
	ok = lost == 0
	sr.steps = append(sr.steps, sustainStep{target: rate, got: g.Rate(), lost: lost, events: t.Events, failures: g.Failures, busy: g.HostBusy, foreign: strings.Join(fr, " ")})
	b.logf("sustain %-8s target %7.0f/s achieved %7.0f/s  events %d (ours %d)  lost %d  host CPUs %.0f%% busy",
		name, rate, g.Rate(), t.Events, g.Failures, lost, 100*g.HostBusy)
	if ok && g.Rate() > sr.best {
		sr.best, sr.busy = g.Rate(), g.HostBusy
	}
	return ok, g, nil
}

// bpfStats measures what the BPF programs of session s take per call, with
// the kernel's run-time statistics on only meanwhile (they cost two clock
// reads per program run): the share of the added cost spent inside the
// programs, as opposed to the tracepoint dispatch, wakeups and the reader.
// The clock runs on while a program is interrupted or its vCPU is descheduled
// by the host, so on a shared VM these figures are noisier than the rows.
func (b *bench) bpfStats(ctx context.Context, rr *roundRes, c int, s session) (string, int, error) {
	closer, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return "", 0, fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	defer closer.Close()
	var progs []*ebpf.Program
	if fs, ok := s.(*floorSession); ok {
		progs = []*ebpf.Program{fs.prog}
	} else if ids, _, err := bpfObjects(s.PID()); err == nil {
		progs = openProgs(ids)
		defer func() {
			for _, p := range progs {
				p.Close()
			}
		}()
	}
	msg := "  in BPF"
	failing := 0
	for w, kind := range []string{"success", "failing"} {
		p0 := readProgRun(progs)
		calls, err := loopCalls(ctx, b.ns, kind, b.o.micro/2)
		if err != nil {
			return "", 0, err
		}
		if kind == "failing" {
			failing = calls
		}
		p1 := readProgRun(progs)
		st := bpfStat{ok: calls > 0 && p1.runs > p0.runs, progs: len(progs)}
		if st.ok {
			st.ns = float64((p1.time - p0.time).Nanoseconds()) / float64(calls)
			st.runsPerCall = float64(p1.runs-p0.runs) / float64(calls)
		}
		rr.bpf[w][c] = st
		msg += fmt.Sprintf(" %s %.0f ns (%.2f runs)", kind, st.ns, st.runsPerCall)
	}
	return msg, failing, nil
}
