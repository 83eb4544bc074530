package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// stormKeys are the counters of eaddr's "stopped" line the accounting uses.
var stormKeys = []string{"events", "lost", "written", "delivered", "dropped", "filtered", "filtered_unresolved", "suppressed", "malformed"}

// stormCounts parses the counters of one "stopped" line; ok is false when
// one is missing.
func stormCounts(kv map[string]string) (map[string]uint64, bool) {
	m := map[string]uint64{}
	for _, k := range stormKeys {
		v, err := strconv.ParseUint(kv[k], 10, 64)
		if err != nil {
			return m, false
		}
		m[k] = v
	}
	return m, true
}

// identity formats "lhs = rhs: exact" or the difference.
func identity(name string, lhs, rhs uint64) string {
	if lhs == rhs {
		return fmt.Sprintf("%s: %d = %d, exact", name, lhs, rhs)
	}
	return fmt.Sprintf("%s: %d vs %d, differs by %+d", name, lhs, rhs, int64(lhs)-int64(rhs))
}

func (b *bench) reportStorm(w io.Writer) {
	fmt.Fprintf(w, "\nstorm (issue 13): %s %s at default flags (stdout to /dev/null) while %d threads fail connect() flat out (EADDRNOTAVAIL, exhausted netns) for %v; %d rounds, none/floor/eaddr alternating; medians over rounds\n",
		b.o.eaddr, strings.Join(stormArgs, " "), stormThreads, b.o.stormTime, len(b.stormRes))
	if !b.have[cfgEaddr] {
		fmt.Fprintf(w, "  not measured: %s\n", b.missing[cfgEaddr])
		return
	}
	perCall := func(s stormCfg) float64 { return s.gen.nsPerCall() }
	thr := func(s stormCfg) float64 { return s.gen.rate() }
	n, f, e := b.stormMed(cfgNone, perCall), b.stormMed(cfgFloor, perCall), b.stormMed(cfgEaddr, perCall)
	tn, tf, te := b.stormMed(cfgNone, thr), b.stormMed(cfgFloor, thr), b.stormMed(cfgEaddr, thr)
	fmt.Fprintf(w, "  failing call (generator thread CPU per call): none %s ns, floor %s ns, eaddr %s ns: eaddr adds %s ns over the floor, %s ns over none\n",
		num(n, 0), num(f, 0), num(e, 0), signed(e-f), signed(e-n))
	fmt.Fprintf(w, "  application throughput: none %s/s, floor %s/s, eaddr %s/s: eaddr/none %s, floor/none %s\n",
		rate(tn), rate(tf), rate(te), ratio(te, tn), ratio(tf, tn))
	cpu := b.stormMed(cfgEaddr, stormCPUPerFailure)
	fmt.Fprintf(w, "  eaddr CPU: %s ns per failure (user+sys / failures generated), %s%% of a core\n",
		num(cpu, 0), num(b.stormMed(cfgEaddr, stormCPUPct), 0))
	fmt.Fprintf(w, "  eaddr RSS (VmHWM) after the storm: %s MB (largest of the rounds)\n", num(b.stormHWM(), 1))
	b.reportStormAccounting(w)
	b.stormTargets(w)
}

func stormCPUPerFailure(s stormCfg) float64 {
	return float64(s.cpu.Nanoseconds()) / float64(s.gen.failures)
}

func stormCPUPct(s stormCfg) float64 { return 100 * s.cpu.Seconds() / s.gen.elapsed.Seconds() }

// stormHWM is eaddr's largest VmHWM over the storm rounds, in MB.
func (b *bench) stormHWM() float64 {
	hwm := math.NaN()
	for _, sr := range b.stormRes {
		if s := sr.c[cfgEaddr]; s.ok && s.hwm > 0 {
			hwm = math.Max(nanZero(hwm), float64(s.hwm)/(1<<20))
		}
	}
	return hwm
}

func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// reportStormAccounting checks eaddr's "stopped" counters of each round
// against the failures the generator made.
func (b *bench) reportStormAccounting(w io.Writer) {
	fmt.Fprintln(w, "  accounting, from eaddr's \"stopped\" line on SIGINT (eaddr traces the whole host: failures of other processes would add to events):")
	for i, sr := range b.stormRes {
		s := sr.c[cfgEaddr]
		if !s.ok {
			continue
		}
		m, ok := stormCounts(s.kv)
		if !ok {
			fmt.Fprintf(w, "    round %d: the stopped line lacks a counter (%v): no accounting\n", i+1, s.kv)
			continue
		}
		// A malformed record was read from the ring but is not an event
		// (never expected): the kernel saw it all the same.
		seen := m["events"] + m["lost"] + m["malformed"]
		fmt.Fprintf(w, "    round %d: generated %d; kernel-seen %d (events %d + lost %d + malformed %d); written %d delivered %d dropped %d filtered %d filtered_unresolved %d suppressed %d\n",
			i+1, s.gen.failures, seen, m["events"], m["lost"], m["malformed"], m["written"], m["delivered"], m["dropped"], m["filtered"], m["filtered_unresolved"], m["suppressed"])
		fmt.Fprintf(w, "      %s\n", identity("events + lost + malformed = generated", seen, s.gen.failures))
		fmt.Fprintf(w, "      %s\n", identity("written + suppressed + filtered + filtered_unresolved = events",
			m["written"]+m["suppressed"]+m["filtered"]+m["filtered_unresolved"], m["events"]))
		fmt.Fprintf(w, "      %s\n", identity("delivered + dropped = written", m["delivered"]+m["dropped"], m["written"]))
		if s.stopNote != "" {
			fmt.Fprintf(w, "      note: %s\n", s.stopNote)
		}
	}
}
