package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// rateLimitOff tells whether eaddr's arguments turn its rate limiter off
// (--rate-limit off or 0, in any of the flag package's spellings).
func rateLimitOff(args []string) bool {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "rate-limit" {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return false
			}
			val = args[i+1]
		}
		return val == "off" || val == "0"
	}
	return false
}

// stormTargets is issue 13's targets table: the storm's figures, and the
// --rate-limit off figures of the rows above when they were measured so.
func (b *bench) stormTargets(w io.Writer) {
	fmt.Fprintln(w, "\nstorm targets (issue 13):")
	perCall := func(s stormCfg) float64 { return s.gen.nsPerCall() }
	thr := func(s stormCfg) float64 { return s.gen.rate() }
	f, e := b.stormMed(cfgFloor, perCall), b.stormMed(cfgEaddr, perCall)
	verdict(w, e-f <= 300, !math.IsNaN(e-f), "storm: failing call <= floor + 300 ns", over(e-f, 300, "ns", fmt.Sprintf("eaddr %+.0f ns over the floor", e-f)))
	tr := b.stormMed(cfgEaddr, thr) / b.stormMed(cfgNone, thr)
	verdict(w, tr >= 0.9, !math.IsNaN(tr), "storm: application throughput >= 90% of no tracer", under(100*tr, 90, "points", fmt.Sprintf("%.0f%% of no tracer", 100*tr)))
	cpu := b.stormMed(cfgEaddr, stormCPUPerFailure)
	verdict(w, cpu <= 150, !math.IsNaN(cpu), "storm: eaddr CPU <= 150 ns per failure", over(cpu, 150, "ns", fmt.Sprintf("%.0f ns per failure", cpu)))
	b.rateLimitOffTargets(w)
	rss := b.stormHWM()
	verdict(w, rss <= 32, !math.IsNaN(rss), "storm: RSS <= 32 MB", over(rss, 32, "MB", fmt.Sprintf("VmHWM %.1f MB", rss)))
}

// over says by how much v exceeds limit, when it does.
func over(v, limit float64, unit, got string) string {
	if v > limit {
		return fmt.Sprintf("%s: missed by %s %s (%.2fx the limit)", got, amount(v-limit), unit, v/limit)
	}
	return got
}

// under says by how much v falls short of limit, when it does.
func under(v, limit float64, unit, got string) string {
	if v < limit {
		return fmt.Sprintf("%s: missed by %s %s", got, amount(limit-v), unit)
	}
	return got
}

// amount formats a shortfall: whole units, one decimal below 10.
func amount(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// rateLimitOffTargets reuses the zero-loss search and the CPU rows when they
// ran eaddr with --rate-limit off; otherwise the verdict says they were not
// measured so.
func (b *bench) rateLimitOffTargets(w io.Writer) {
	const lossT = "--rate-limit off: zero loss at >= 200k failures/s"
	switch {
	case b.o.skipSustain:
		verdictS(w, "n/a", lossT, "not measured in this run (-skip-sustain)")
	case !rateLimitOff(b.o.sustainArgs):
		verdictS(w, "n/a", lossT, fmt.Sprintf("not measured in this run (the zero-loss search ran eaddr %s; -sustain-args 'trace --rate-limit off')", strings.Join(b.o.sustainArgs, " ")))
	default:
		s := b.res.sustain[cfgEaddr]
		got := fmt.Sprintf("lost=0 up to %s/s", rate(s.best))
		if s.firstLoss > 0 {
			got += fmt.Sprintf(", lost at %s/s", rate(s.firstLoss))
		}
		switch {
		case s.best >= 200e3:
			verdictS(w, "met", lossT, got)
		case s.firstLoss == 0:
			verdictS(w, "UNPROVEN", lossT, got+": the generator could not reach 200k/s")
		default:
			verdictS(w, "MISSED", lossT, got+fmt.Sprintf(": missed by %s/s", rate(200e3-s.best)))
		}
	}
	const firstT = "first, unsuppressed event of a key: failing call <= floor + 800 ns"
	if !rateLimitOff(b.o.eaddrArgs) {
		verdictS(w, "n/a", firstT, fmt.Sprintf("not measured in this run (the per-call rows ran eaddr %s, whose repeats are suppressed; -eaddr-args 'trace --rate-limit off' makes every failure an event)", strings.Join(b.o.eaddrArgs, " ")))
	} else {
		e, f := b.res.med(rowFailing, cfgEaddr), b.res.med(rowFailing, cfgFloor)
		verdict(w, e-f <= 800, !math.IsNaN(e-f), firstT, over(e-f, 800, "ns", fmt.Sprintf("eaddr %+.0f ns over the floor (the per-call failing row, every failure an event)", e-f)))
	}
	for _, x := range []struct{ rate, limit float64 }{{10e3, 2}, {100e3, 10}} {
		t := fmt.Sprintf("--rate-limit off: CPU <= %.0f%% of a core at %s/s", x.limit, rate(x.rate))
		i := indexOf(b.res.cpuTargets, x.rate)
		switch {
		case !rateLimitOff(b.o.eaddrArgs):
			verdictS(w, "n/a", t, fmt.Sprintf("not measured in this run (the CPU rows ran eaddr %s; -eaddr-args 'trace --rate-limit off')", strings.Join(b.o.eaddrArgs, " ")))
		case i < 0:
			verdictS(w, "n/a", t, "not measured in this run (not in -cpu-rates)")
		default:
			s, ok := b.res.cpuMed(i, cfgEaddr)
			verdict(w, s.pct <= x.limit, ok, t, over(s.pct, x.limit, "points", fmt.Sprintf("%.1f%% at %s/s achieved", s.pct, rate(s.rate))))
		}
	}
}

func indexOf(v []float64, x float64) int {
	for i, y := range v {
		if y == x {
			return i
		}
	}
	return -1
}
