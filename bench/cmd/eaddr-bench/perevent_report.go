package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// peMed is the median over rounds of f of binary k at rate index i.
func (pe *peState) med(i, k int, f func(peSample) float64) float64 {
	var v []float64
	for _, pr := range pe.rounds {
		if s := pr.s[i][k]; s.ok {
			if x := f(s); !math.IsNaN(x) && !math.IsInf(x, 0) {
				v = append(v, x)
			}
		}
	}
	return median(v)
}

// goBenchNs is the ns/op of the Go benchmark named name in this run (NaN:
// not run), and its allocs/op.
func (b *bench) goBenchNs(name string) (ns, allocs float64) {
	for _, g := range b.res.goBench {
		if g.name == name {
			return g.nsPerOp, g.allocs
		}
	}
	return math.NaN(), math.NaN()
}

func (b *bench) reportPerEvent(w io.Writer) {
	pe := b.pe
	fmt.Fprintf(w, "\nper event (issue 24): eaddr %s --netns <the bench netns> (every failure an event), stdout a 1 MiB pipe this driver drains (one thread, newlines counted); %d rounds, %v per binary, rate and round, new and base alternating (order rotating); medians over rounds; CPU from /proc/PID/stat (10 ms ticks) over the run and until its lines were read, per line read\n",
		strings.Join(b.o.perEventArgs, " "), len(pe.rounds), b.o.perEventTime)
	for k := range pe.bins {
		if pe.bins[k] != "" {
			fmt.Fprintf(w, "  %-4s %s: %s\n", peNames[k], pe.bins[k], pe.desc[k])
		}
	}
	es, _ := b.goBenchNs("BenchmarkEventJSONExplainShort")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tnew\tbase\tnew/base\t")
	row := func(label string, prec int, v func(k int) float64) {
		n, bs := v(peNew), v(peBase)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", label, num(n, prec), num(bs, prec), ratio(n, bs))
	}
	for i, r := range b.o.cpuRates {
		at := "at " + rate(r) + "/s: "
		row(at+"user CPU per line, ns", 0, func(k int) float64 { return pe.med(i, k, peSample.userNs) })
		row(at+"sys CPU per line, ns", 0, func(k int) float64 { return pe.med(i, k, peSample.sysNs) })
		row(at+"CPU, % of a core (user+sys)", 1, func(k int) float64 { return pe.med(i, k, peSample.pct) })
		row(at+"rate achieved, /s", 0, func(k int) float64 { return pe.med(i, k, func(s peSample) float64 { return s.gen.Rate() }) })
		row(at+"user per line / EventJSONExplainShort", 2, func(k int) float64 { return pe.med(i, k, peSample.userNs) / es })
		row(at+"this driver's pipe reader, ns CPU per line", 0, func(k int) float64 {
			return pe.med(i, k, func(s peSample) float64 { return float64(s.reader.Nanoseconds()) / float64(s.readLines) })
		})
	}
	fmt.Fprintf(tw, "BenchmarkEventJSONExplainShort (./output, this run), ns/op\t%s\t-\t-\t\n", num(es, 0))
	st, _ := b.goBenchNs("BenchmarkSteadyEvent")
	fmt.Fprintf(tw, "BenchmarkSteadyEvent (./pipeline, this run: no ring, no write), ns/op; / ExplainShort\t%s; %s\t-\t-\t\n", num(st, 0), ratio(st, es))
	if !b.o.skipSustain {
		fmt.Fprintf(tw, "highest rate with lost=0 and dropped=0, /s\t%s\t%s\t%s\t\n", sustainCell(pe.search[peNew]),
			map[bool]string{true: sustainCell(pe.search[peBase]), false: "-"}[pe.bins[peBase] != ""], ratio(pe.search[peNew].best, pe.search[peBase].best))
	}
	tw.Flush()
	b.peAccounting(w)
	b.peTargets(w, es)
}

// peAccounting checks every sample: lines read = written = events =
// failures generated, nothing lost or dropped.
func (b *bench) peAccounting(w io.Writer) {
	pe := b.pe
	var bad []string
	n := 0
	for r, pr := range pe.rounds {
		for i := range pr.s {
			for k, s := range pr.s[i] {
				if pe.bins[k] == "" {
					continue
				}
				n++
				m, ok := stormCounts(s.kv)
				g := s.gen.Failures
				if !ok || s.lines != g || m["written"] != g || m["events"] != g || m["lost"] != 0 || m["dropped"] != 0 || s.note != "" {
					bad = append(bad, fmt.Sprintf("round %d %s at %s/s: generated %d, lines %d, written %d, events %d, lost %d, dropped %d %s",
						r+1, peNames[k], rate(b.o.cpuRates[i]), g, s.lines, m["written"], m["events"], m["lost"], m["dropped"], s.note))
				}
			}
		}
	}
	if len(bad) == 0 {
		fmt.Fprintf(w, "  accounting: in all %d measurements, lines read = written = events = failures generated; lost 0, dropped 0\n", n)
		return
	}
	fmt.Fprintf(w, "  accounting: %d of %d measurements differ (the figures per line divide by lines read):\n", len(bad), n)
	for _, l := range bad {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

// peTargets is issue 24's table for the per-event path.
func (b *bench) peTargets(w io.Writer, es float64) {
	pe := b.pe
	fmt.Fprintln(w, "\nper-event targets (issue 24; base's figure in brackets):")
	hasBase := pe.bins[peBase] != ""
	inBase := func(f string) string {
		if !hasBase {
			return ""
		}
		return " [base " + f + "]"
	}
	for i, r := range b.o.cpuRates {
		u, ub := pe.med(i, peNew, peSample.userNs), pe.med(i, peBase, peSample.userNs)
		t := fmt.Sprintf("user CPU per line <= 1.5x EventJSONExplainShort, %s/s", rate(r))
		got := fmt.Sprintf("%.0f ns per line, %s of its %.0f ns%s", u, ratio(u, es)+"x", es, inBase(ratio(ub, es)+"x"))
		verdict(w, u/es <= 1.5, !math.IsNaN(u/es), t, over(u/es, 1.5, "x", got))
	}
	_, allocs := b.goBenchNs("BenchmarkSteadyEvent")
	got := fmt.Sprintf("BenchmarkSteadyEvent (./pipeline): %s allocs/op (rounded down)", num(allocs, 0))
	switch st := b.res.steadyTest; {
	case st == nil:
		verdict(w, allocs == 0, !math.IsNaN(allocs), "0 allocations on the steady path", got+"; TestSteadyPathDoesNotAllocate not run")
	case *st != "":
		verdictS(w, "MISSED", "0 allocations on the steady path", got+"; TestSteadyPathDoesNotAllocate: "+*st)
	default:
		verdict(w, math.IsNaN(allocs) || allocs == 0, true, "0 allocations on the steady path", got+"; TestSteadyPathDoesNotAllocate passed (none in 500 events)")
	}
	for _, x := range []struct{ rate, limit float64 }{{10e3, 2}, {100e3, 15}} {
		t := fmt.Sprintf("CPU <= %.0f%% of a core at %s/s", x.limit, rate(x.rate))
		i := indexOf(b.o.cpuRates, x.rate)
		if i < 0 {
			verdictS(w, "n/a", t, "not measured in this run (not in -cpu-rates)")
			continue
		}
		p, pb := pe.med(i, peNew, peSample.pct), pe.med(i, peBase, peSample.pct)
		verdict(w, p <= x.limit, !math.IsNaN(p), t, over(p, x.limit, "points", fmt.Sprintf("%.1f%%%s", p, inBase(strconv.FormatFloat(pb, 'f', 1, 64)+"%"))))
	}
	const lossT = "zero loss at >= 150k failures/s"
	if b.o.skipSustain {
		verdictS(w, "n/a", lossT, "not measured in this run (-skip-sustain)")
		return
	}
	s := pe.search[peNew]
	got = fmt.Sprintf("%s/s%s", sustainCell(s), inBase(sustainCell(pe.search[peBase])))
	switch {
	case s.best >= 150e3:
		verdictS(w, "met", lossT, got)
	case s.firstLoss == 0:
		verdictS(w, "UNPROVEN", lossT, got+": the generator could not reach 150k/s")
	default:
		verdictS(w, "MISSED", lossT, got+fmt.Sprintf(": missed by %s/s", rate(150e3-s.best)))
	}
}
