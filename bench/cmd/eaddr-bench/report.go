package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Rows measured every round.
const (
	rowSuccess = iota
	rowFailing
	rowGetppid
	rowRSS
	rowAttach
	numRows
)

type sustainStep struct {
	target, got  float64
	lost, events uint64
	failures     uint64
	busy         float64
	foreign      string // other tracers' programs loaded at the start of the step
}

type sustainResult struct {
	best           float64 // highest achieved rate of a step with lost=0
	busy           float64 // host CPU busy share during that step
	firstLoss      float64 // lowest target rate of a step that lost events
	generatorBound bool    // the generator could not reach the next target: best is a lower bound
	neverLost      bool    // no step of the ladder lost events
	ceiling        float64 // none, floor: the generator's top rate
	steps          []sustainStep
}

type goBenchLine struct {
	name                string
	nsPerOp, bytesPerOp float64
	allocs              float64
	metrics             map[string]float64 // the benchmark's own (b.ReportMetric), by unit
}

// cpuSample is a tracer's CPU use at one failure rate, in % of a core.
type cpuSample struct {
	ok             bool
	pct, user, sys float64
	rate           float64 // failures/s the generator achieved
	lost           uint64  // eaddr: events dropped meanwhile (its "lost" map)
	hasLost        bool
}

// roundRes is one round: every configuration once.
type roundRes struct {
	clean    bool     // no other tracer's program was seen
	foreign  []string // what was seen, when
	v        [numRows][numCfg]float64
	cpu      [][numCfg]cpuSample // per -cpu-rates entry
	failLost [numCfg]uint64      // eaddr: events dropped during the failing loop
	bpf      [2][numCfg]bpfStat  // success, failing
}

// bpfStat is the BPF programs' own run time per call of one workload.
type bpfStat struct {
	ok          bool
	ns          float64 // run time of all the configuration's programs / calls made
	runsPerCall float64 // program runs / calls made (more than expected: other processes' calls)
	progs       int
}

func newRound(ncpu int) *roundRes {
	rr := &roundRes{clean: true, cpu: make([][numCfg]cpuSample, ncpu)}
	for i := range rr.v {
		for c := range rr.v[i] {
			rr.v[i][c] = math.NaN()
		}
	}
	return rr
}

type results struct {
	rounds      []*roundRes
	cpuTargets  []float64
	roundLost   [numCfg]uint64
	roundEvents [numCfg]uint64
	roundOurs   [numCfg]uint64
	sustain     [numCfg]sustainResult
	goBench     []goBenchLine
	goBenchErr  error
	steadyTest  *string // pipeline's TestSteadyPathDoesNotAllocate: "" passed, else its failure; nil not run
	notes       []string
	wall        time.Duration
}

func newResults(o options) results { return results{cpuTargets: o.cpuRates} }

// used are the rounds the medians are taken over: the undisturbed ones, or
// all when every round was disturbed.
func (r *results) used() []*roundRes {
	var clean []*roundRes
	for _, rr := range r.rounds {
		if rr.clean {
			clean = append(clean, rr)
		}
	}
	if len(clean) == 0 {
		return r.rounds
	}
	return clean
}

func (r *results) med(row, c int) float64 {
	var v []float64
	for _, rr := range r.used() {
		if !math.IsNaN(rr.v[row][c]) {
			v = append(v, rr.v[row][c])
		}
	}
	return median(v)
}

func (r *results) bpfMed(w, c int) bpfStat {
	var ns, runs []float64
	for _, rr := range r.used() {
		if st := rr.bpf[w][c]; st.ok {
			ns, runs = append(ns, st.ns), append(runs, st.runsPerCall)
		}
	}
	if len(ns) == 0 {
		return bpfStat{}
	}
	return bpfStat{ok: true, ns: median(ns), runsPerCall: median(runs)}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of v (0 <= q <= 1), interpolated between the
// two nearest ranks; quantile(v, 0.5) is the median.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// cpuMed is the median CPU sample at rate index i (each field on its own).
func (r *results) cpuMed(i, c int) (cpuSample, bool) {
	var pct, user, sys, rate []float64
	var lost uint64
	hasLost := false
	for _, rr := range r.used() {
		if s := rr.cpu[i][c]; s.ok {
			pct, user, sys, rate = append(pct, s.pct), append(user, s.user), append(sys, s.sys), append(rate, s.rate)
			lost += s.lost
			hasLost = hasLost || s.hasLost
		}
	}
	if len(pct) == 0 {
		return cpuSample{}, false
	}
	return cpuSample{ok: true, pct: median(pct), user: median(user), sys: median(sys), rate: median(rate), lost: lost, hasLost: hasLost}, true
}

// rate formats a rate as 12.3k/s.
func rate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func signed(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.0f", v)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func (b *bench) report(w io.Writer) {
	r := &b.res
	o := b.o
	fmt.Fprintf(w, "\neaddr-bench: medians of %d rounds (%d run, %d disturbed by another tracer); %s per loop, %s per CPU measurement, %d generator threads on %d CPUs; %s in all\n",
		len(r.used()), len(r.rounds), len(r.rounds)-countClean(r.rounds), o.micro, o.cpuTime, o.workers, numCPU(), r.wall.Round(time.Second))
	fmt.Fprintf(w, "per-call rows: thread CPU time per call (CLOCK_THREAD_CPUTIME_ID), per round the %g quantile over batches of a few ms; failing: (socket+connect+close) - (socket+close)\n", o.batchQ)
	if b.have[cfgEaddr] {
		fmt.Fprintf(w, "eaddr: %s %s (stdout to /dev/null; %s)", o.eaddr, strings.Join(o.eaddrArgs, " "), eaddrVersion(o.eaddr))
		if !o.skipSustain {
			fmt.Fprintf(w, "; zero-loss search: %s %s", o.eaddr, strings.Join(o.sustainArgs, " "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "kernel %s\n", kernelRelease())
	if b.have[cfgBpftrace] {
		fmt.Fprintf(w, "bpftrace: %s %s (-o a file on tmpfs)\n", bpftraceVersion(o.bpftrace), o.script)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cell := func(c int, s string) string {
		if !b.have[c] {
			return b.missing[c]
		}
		return s
	}
	row := func(label string, f func(c int) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for c := 0; c < numCfg; c++ {
			fmt.Fprintf(tw, "%s\t", cell(c, f(c)))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "workload\t")
	for c := 0; c < numCfg; c++ {
		fmt.Fprintf(tw, "%s\t", cfgNames[c])
	}
	fmt.Fprintln(tw)
	micro := func(row int) func(int) string {
		return func(c int) string { return num(r.med(row, c), 0) }
	}
	row("success: UDP connect() 127.0.0.1:9, ns/call", micro(rowSuccess))
	row("failing: TCP connect() EADDRNOTAVAIL, ns/call", micro(rowFailing))
	row("unrelated: getppid(), ns/call", micro(rowGetppid))
	if !o.skipSustain {
		row("highest failure rate with lost=0 (4 MiB ring), /s", func(c int) string {
			s := r.sustain[c]
			switch {
			case c == cfgNone || c == cfgFloor:
				return fmt.Sprintf("(generator max %s)", rate(s.ceiling))
			}
			return sustainCell(s)
		})
	}
	for i, t := range r.cpuTargets {
		row(fmt.Sprintf("CPU at %s failures/s, %% of a core (user+sys; achieved)", rate(t)), func(c int) string {
			s, ok := r.cpuMed(i, c)
			if !ok {
				return "-"
			}
			l := ""
			if s.hasLost && s.lost > 0 {
				l = fmt.Sprintf("; lost %d", s.lost)
			}
			return fmt.Sprintf("%.1f%% (%.1f+%.1f; %s/s%s)", s.pct, s.user, s.sys, rate(s.rate), l)
		})
	}
	row("RSS (VmHWM), MB", func(c int) string { return num(r.med(rowRSS, c), 1) })
	row("time to attached, ms", func(c int) string {
		if c == cfgNone {
			return "-"
		}
		return num(r.med(rowAttach, c), 0)
	})
	for _, g := range r.goBench {
		label := "user space per event: "
		switch {
		case strings.HasPrefix(g.name, "BenchmarkCgroupRecord"):
			label = "BPF per failure, cgroup path: "
		case strings.HasPrefix(g.name, "BenchmarkCgroupPath"), strings.HasPrefix(g.name, "BenchmarkLookupCgroup"):
			label = "user space per new cgroup: "
		}
		if strings.HasPrefix(g.name, "BenchmarkPortSample") {
			label = "port sampler, one sample: "
		}
		row(label+strings.TrimPrefix(g.name, "Benchmark"), func(c int) string {
			if c != cfgEaddr {
				return "-"
			}
			if pct, ok := g.metrics["%core@15s"]; ok {
				return fmt.Sprintf("%.2f%% of a core at 15 s, %.0f ns/socket", pct, g.metrics["cpu-ns/socket"])
			}
			return fmt.Sprintf("%.0f ns, %.0f allocs", g.nsPerOp, g.allocs)
		})
	}
	if r.goBenchErr != nil {
		row("user space per event", func(c int) string {
			if c != cfgEaddr {
				return "-"
			}
			return "go test failed"
		})
	}
	tw.Flush()

	// Added cost.
	fmt.Fprintln(w, "\nadded cost per call, ns (differences of the medians above)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfloor-none\teaddr-none\tbpftrace-none\teaddr/bpftrace\teaddr-floor\tbpftrace-floor\teaddr/bpftrace\teaddr/floor\t")
	for _, x := range []struct {
		label string
		row   int
	}{{"success", rowSuccess}, {"failing", rowFailing}, {"getppid", rowGetppid}} {
		n, f, e, t := r.med(x.row, cfgNone), r.med(x.row, cfgFloor), r.med(x.row, cfgEaddr), r.med(x.row, cfgBpftrace)
		bt := func(s string) string {
			if !b.have[cfgBpftrace] {
				return b.missing[cfgBpftrace]
			}
			return s
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.label,
			signed(f-n), signed(e-n), bt(signed(t-n)), bt(ratio(e-n, t-n)),
			signed(e-f), bt(signed(t-f)), bt(ratio(e-f, t-f)), ratio(e, f))
	}
	tw.Flush()

	if b.o.bpfStats {
		fmt.Fprintln(w, "\ntime inside the BPF programs per call, ns (kernel BPF statistics; program runs per call in parentheses)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tfloor\teaddr\tbpftrace\t")
		for wl, label := range []string{"success", "failing"} {
			fmt.Fprintf(tw, "%s\t", label)
			for c := cfgFloor; c <= cfgBpftrace; c++ {
				st := r.bpfMed(wl, c)
				switch {
				case !b.have[c]:
					fmt.Fprintf(tw, "%s\t", b.missing[c])
				case !st.ok:
					fmt.Fprintf(tw, "-\t")
				default:
					fmt.Fprintf(tw, "%.0f (%.2f)\t", st.ns, st.runsPerCall)
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}

	b.targets(w)

	// Details: every round's value, losses, what else was running.
	fmt.Fprintln(w, "\nper round (ns/call; * disturbed by another tracer, not in the medians when undisturbed rounds exist):")
	for _, x := range []struct {
		label string
		row   int
	}{{"success", rowSuccess}, {"failing", rowFailing}, {"getppid", rowGetppid}} {
		for c := 0; c < numCfg; c++ {
			if !b.have[c] {
				continue
			}
			var s []string
			for _, rr := range r.rounds {
				v := num(rr.v[x.row][c], 0)
				if !rr.clean {
					v += "*"
				}
				s = append(s, v)
			}
			fmt.Fprintf(w, "  %-8s %-9s %s\n", x.label, cfgNames[c], strings.Join(s, " "))
		}
	}
	for _, c := range []int{cfgEaddr, cfgBpftrace} {
		if b.have[c] {
			fmt.Fprintf(w, "%s during the rounds: %d events (%d failures made by this driver; the rest, other processes'), %d lost", cfgNames[c], r.roundEvents[c], r.roundOurs[c], r.roundLost[c])
			if c == cfgEaddr {
				var fl []string
				for _, rr := range r.rounds {
					fl = append(fl, strconv.FormatUint(rr.failLost[c], 10))
				}
				fmt.Fprintf(w, " (lost during each round's failing loop: %s)", strings.Join(fl, " "))
			}
			fmt.Fprintln(w)
		}
	}
	if !o.skipSustain {
		for _, c := range []int{cfgEaddr, cfgBpftrace} {
			if !b.have[c] {
				continue
			}
			fmt.Fprintf(w, "%s zero-loss search (target -> achieved, lost; events seen vs made by the generator; host CPUs busy):\n", cfgNames[c])
			for _, s := range r.sustain[c].steps {
				f := ""
				if s.foreign != "" {
					f = "  other tracer loaded: " + s.foreign
				}
				fmt.Fprintf(w, "  %7s/s -> %7s/s  lost %-8d events %d / %d  busy %.0f%%%s\n", rate(s.target), rate(s.got), s.lost, s.events, s.failures, 100*s.busy, f)
			}
		}
	}
	disturbed := false
	for i, rr := range r.rounds {
		if !rr.clean {
			if !disturbed {
				fmt.Fprintln(w, "WARNING: other BPF tracing programs were loaded (another tracer on this host: every configuration, none included, pays for its tracepoints):")
				disturbed = true
			}
			fmt.Fprintf(w, "  round %d: %s\n", i+1, strings.Join(rr.foreign, "; "))
		}
	}
	if !disturbed {
		fmt.Fprintln(w, "no other BPF tracing program was loaded before or after any measurement")
	}
	for _, n := range r.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// sustainCell is a tracer's zero-loss search result.
func sustainCell(s sustainResult) string {
	switch {
	case s.best == 0 && s.firstLoss > 0:
		return fmt.Sprintf("< %s (lost at every step)", rate(s.firstLoss))
	case s.generatorBound || s.neverLost:
		return fmt.Sprintf(">= %s (generator max)", rate(s.best))
	case s.best > 0:
		return fmt.Sprintf("%s (lost at %s)", rate(s.best), rate(s.firstLoss))
	}
	return "?"
}

// verdict formats one target line.
func verdict(w io.Writer, ok bool, known bool, target, got string) {
	v := "MISSED"
	switch {
	case !known:
		v = "n/a"
	case ok:
		v = "met"
	}
	verdictS(w, v, target, got)
}

func verdictS(w io.Writer, v, target, got string) {
	fmt.Fprintf(w, "  %-9s %-58s %s\n", v, target, got)
}

func (b *bench) targets(w io.Writer) {
	r := &b.res
	fmt.Fprintln(w, "\ntargets:")
	hb := b.have[cfgBpftrace]
	for _, x := range []struct {
		label string
		row   int
	}{{"success path", rowSuccess}, {"getppid", rowGetppid}} {
		n, f, e, t := r.med(x.row, cfgNone), r.med(x.row, cfgFloor), r.med(x.row, cfgEaddr), r.med(x.row, cfgBpftrace)
		verdict(w, e <= 1.10*f, !math.IsNaN(e/f), x.label+": within 10% of the floor",
			fmt.Sprintf("eaddr/floor %.3f (%+.0f ns)", e/f, e-f))
		got := b.missing[cfgBpftrace]
		if hb {
			got = fmt.Sprintf("added over none: eaddr %+.0f ns, bpftrace %+.0f ns, ratio %s (over the floor: %+.0f vs %+.0f ns)", e-n, t-n, ratio(e-n, t-n), e-f, t-f)
			if t-n <= 0 {
				got += "; bpftrace adds nothing measurable here, no ratio"
			}
		}
		verdict(w, (e-n) <= 0.5*(t-n), hb && t-n > 0, x.label+": at most half of bpftrace's added cost", got)
	}
	n, e, t := r.med(rowFailing, cfgNone), r.med(rowFailing, cfgEaddr), r.med(rowFailing, cfgBpftrace)
	got0 := fmt.Sprintf("%+.0f ns", e-n)
	if st := r.bpfMed(1, cfgEaddr); st.ok {
		got0 += fmt.Sprintf(" (of which %.0f ns inside eaddr's program; floor-none %+.0f ns)", st.ns, r.med(rowFailing, cfgFloor)-n)
	}
	verdict(w, e-n <= 1500, !math.IsNaN(e-n), "failing path: at most +1.5 us over none", got0)
	got := b.missing[cfgBpftrace]
	if hb {
		got = fmt.Sprintf("eaddr %+.0f ns, bpftrace %+.0f ns, ratio %s", e-n, t-n, ratio(e-n, t-n))
	}
	verdict(w, (e-n) <= 0.2*(t-n), hb && t-n > 0, "failing path: at most a fifth of bpftrace's added cost", got)
	if !b.o.skipSustain {
		s := r.sustain[cfgEaddr]
		got := fmt.Sprintf("lost=0 up to %s/s (host CPUs %.0f%% busy)", rate(s.best), 100*s.busy)
		if s.firstLoss > 0 {
			got += fmt.Sprintf(", lost at %s/s", rate(s.firstLoss))
		} else {
			got += ", no step lost events"
		}
		const t = "zero loss at >= 200k failures/s, both CPUs busy"
		switch {
		case !b.have[cfgEaddr]:
			verdictS(w, "n/a", t, "eaddr not measured")
		case s.best >= 200e3:
			verdictS(w, "met", t, got)
		case s.firstLoss == 0:
			// No step lost anything, but the generator never reached 200k/s.
			verdictS(w, "UNPROVEN", t, got+": the generator could not reach 200k/s with eaddr attached")
		default:
			verdictS(w, "MISSED", t, got)
		}
	}
	for i, tr := range r.cpuTargets {
		limit := math.NaN()
		switch tr {
		case 10e3:
			limit = 2
		case 100e3:
			limit = 10
		}
		if math.IsNaN(limit) {
			continue
		}
		s, ok := r.cpuMed(i, cfgEaddr)
		verdict(w, s.pct <= limit, ok, fmt.Sprintf("CPU <= %.0f%% of a core at %s failures/s", limit, rate(tr)),
			fmt.Sprintf("%.1f%% (%.1f user, %.1f sys) at %s/s achieved", s.pct, s.user, s.sys, rate(s.rate)))
	}
	rss := r.med(rowRSS, cfgEaddr)
	verdict(w, rss <= 32, !math.IsNaN(rss), "RSS <= 32 MB", fmt.Sprintf("%.1f MB", rss))
	at := r.med(rowAttach, cfgEaddr)
	verdict(w, at <= 150, !math.IsNaN(at), "time to attached <= 150 ms", fmt.Sprintf("%.0f ms", at))
	for _, g := range r.goBench {
		if g.name == "BenchmarkEventJSON" {
			got := fmt.Sprintf("EventJSON %.0f ns/op, %.0f allocs/op", g.nsPerOp, g.allocs)
			for _, x := range r.goBench {
				if x.name == "BenchmarkEventJSONExplainShort" {
					got += fmt.Sprintf(" (with --explain short, as run above: %.0f ns/op, %.0f allocs/op)", x.nsPerOp, x.allocs)
				}
			}
			verdict(w, g.nsPerOp <= 1000 && g.allocs == 0, true, "user space <= 1 us and 0 allocations per event", got)
		}
	}
	if len(r.goBench) == 0 {
		verdict(w, false, false, "user space <= 1 us and 0 allocations per event", "go benchmark not run")
	}
}

// benchLine is a benchmark's result line; metrics of its own (MB/s,
// dropped/op) may stand between ns/op and B/op.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.e+-]+ \S+)*?\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// benchMetric is one "value unit" pair of a benchmark's result line.
var benchMetric = regexp.MustCompile(`\s([\d.e+-]+) (\S+)`)

// goBenches are the Go benchmarks `make bench` runs: user space per event
// (the record alone, and pipeline's whole steady path: decode, attribution,
// explanation, the shared snapshot, JSON into the sink), and what naming a
// cgroup costs in user space and in the BPF program; and one sample of the
// port sampler (./ports: the node walk beside each netns read on its own),
// per netns and per socket, and on two node-like setups (100 netns x 500
// sockets, 250 x 200) side by side with the sampler before the walk.
var goBenches = [][]string{
	{"-bench", "BenchmarkEventJSON", "-benchmem", "./output"},
	{"-bench", "BenchmarkSteadyEvent", "-benchmem", "./pipeline"},
	{"-bench", "BenchmarkPortSample$", "-benchtime", "20x", "-benchmem", "./ports"},
	{"-bench", "BenchmarkPortSampleNode$", "-benchtime", "3x", "-benchmem", "-timeout", "30m", "./ports"},
	{"-bench", "BenchmarkCgroupPath", "-benchmem", "./pod"},
	{"-bench", "BenchmarkCgroupRecord|BenchmarkLookupCgroup", "-benchtime", "5x", "-benchmem", "./tracer"},
}

func runGoBench(ctx context.Context, goTool string) ([]goBenchLine, error) {
	var all []goBenchLine
	for _, args := range goBenches {
		res, err := runGoBench1(ctx, goTool, args)
		all = append(all, res...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// runSteadyTest runs pipeline's TestSteadyPathDoesNotAllocate: "" when it
// passed, else its last lines.
func runSteadyTest(ctx context.Context, goTool string) string {
	cmd := exec.CommandContext(ctx, goTool, "test", "-count=1", "-run", "^TestSteadyPathDoesNotAllocate$", "./pipeline")
	out, err := combinedOutput(cmd)
	if err != nil {
		return fmt.Sprintf("%v: %s", err, lastLines(string(out), 4))
	}
	return ""
}

// parseBenchLine reads one result line of go test -bench.
func parseBenchLine(line string) (goBenchLine, bool) {
	m := benchLine.FindStringSubmatch(line)
	if m == nil {
		return goBenchLine{}, false
	}
	g := goBenchLine{name: m[1], metrics: map[string]float64{}}
	g.nsPerOp, _ = strconv.ParseFloat(m[2], 64)
	g.bytesPerOp, _ = strconv.ParseFloat(m[3], 64)
	g.allocs, _ = strconv.ParseFloat(m[4], 64)
	for _, mm := range benchMetric.FindAllStringSubmatch(line, -1) {
		g.metrics[mm[2]], _ = strconv.ParseFloat(mm[1], 64)
	}
	return g, true
}

func runGoBench1(ctx context.Context, goTool string, args []string) ([]goBenchLine, error) {
	cmd := exec.CommandContext(ctx, goTool, append([]string{"test", "-run", "XXX"}, args...)...)
	out, err := combinedOutput(cmd)
	var res []goBenchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if g, ok := parseBenchLine(sc.Text()); ok {
			res = append(res, g)
		}
	}
	if err != nil {
		return res, fmt.Errorf("%v: %s", err, lastLines(string(out), 10))
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no benchmark result in the output: %s", lastLines(string(out), 10))
	}
	return res, nil
}

func countClean(rounds []*roundRes) int {
	n := 0
	for _, rr := range rounds {
		if rr.clean {
			n++
		}
	}
	return n
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lastN(l, n), "\n")
}

func bpftraceVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return bin
	}
	return strings.TrimSpace(string(out))
}

func eaddrVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(string(out))
}

func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return "?"
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}
