package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The per-event section (issue 24, item 5): what one event costs eaddr's
// user space end to end, from the ring record to a whole line on stdout,
// with every failure an event (--rate-limit off, every other flag at its
// default: JSON, --explain short), stdout a pipe this driver drains. With
// -base REV the same binary of revision REV is measured beside it, round
// after round in rotating order, so that the ratio new/base is of one run
// on one machine.

const (
	peNew = iota
	peBase
	numPE
)

var peNames = [numPE]string{"new", "base"}

// peSample is one binary at one rate in one round.
type peSample struct {
	ok        bool
	gen       genResult
	lines     uint64        // lines read from its stdout during the generator's run and until they settled
	user, sys time.Duration // its utime and stime meanwhile
	reader    time.Duration // this driver's pipe reader's CPU time, the whole run
	readLines uint64        // lines the reader read, the whole run
	kv        map[string]string
	note      string // how it stopped, when not cleanly
}

func (s peSample) userNs() float64 { return float64(s.user.Nanoseconds()) / float64(s.lines) }
func (s peSample) sysNs() float64  { return float64(s.sys.Nanoseconds()) / float64(s.lines) }
func (s peSample) pct() float64    { return 100 * (s.user + s.sys).Seconds() / s.gen.Elapsed.Seconds() }

type peRound struct{ s [][numPE]peSample } // per -cpu-rates entry

// peState is the section's setup and results.
type peState struct {
	bins   [numPE]string // "" : not measured (no -base)
	desc   [numPE]string
	rounds []*peRound
	search [numPE]sustainResult
}

// setupPerEvent names the binaries of the section, building -base's;
// remove takes the built one away.
func (b *bench) setupPerEvent(ctx context.Context) (remove func(), err error) {
	b.pe = &peState{}
	b.pe.bins[peNew], b.pe.desc[peNew] = b.o.eaddr, eaddrVersion(b.o.eaddr)
	if b.o.base == "" {
		return func() {}, nil
	}
	b.logf("building eaddr at %s (-base) in a temporary git worktree", b.o.base)
	bin, desc, remove, err := buildBase(ctx, b.o.goTool, b.o.base)
	if err != nil {
		return nil, err
	}
	b.pe.bins[peBase], b.pe.desc[peBase] = bin, desc
	return remove, nil
}

// peArgs are eaddr's arguments: -per-event-args and the bench netns, so
// that the kernel reports this driver's failures only (other processes'
// failures on a shared host would count as events) and the lines can be
// checked against the failures made; the filter is a compare in the BPF
// program, user space does the same per event.
func (b *bench) peArgs() []string {
	return append(append([]string(nil), b.o.perEventArgs...), "--netns", strconv.FormatUint(b.ns.Inode(), 10))
}

// pipedEaddr is eaddr with its stdout a linePipe.
type pipedEaddr struct {
	*eaddrSession
	lp *linePipe
}

func (b *bench) startPiped(ctx context.Context, bin string) (*pipedEaddr, error) {
	lp, err := newLinePipe()
	if err != nil {
		return nil, err
	}
	s, err := startEaddr(ctx, bin, b.peArgs(), lp.w)
	lp.closeWriter()
	if err != nil {
		return nil, err
	}
	return &pipedEaddr{eaddrSession: s, lp: lp}, nil
}

// Stop stops eaddr and waits for its last lines to be read.
func (s *pipedEaddr) Stop() (totals, error) {
	t, err := s.eaddrSession.Stop()
	s.lp.wait(5 * time.Second)
	return t, err
}

// perEvent runs the section: -rounds rounds of every -cpu-rates entry, both
// binaries each (the order rotating), then the zero-loss search of both,
// step by step side by side.
func (b *bench) perEvent(ctx context.Context) error {
	pe := b.pe
	for r := 0; r < b.o.rounds; r++ {
		if err := b.waitQuiet(ctx); err != nil {
			return err
		}
		pr := &peRound{s: make([][numPE]peSample, len(b.o.cpuRates))}
		pe.rounds = append(pe.rounds, pr)
		for i, rt := range b.o.cpuRates {
			for j := 0; j < numPE; j++ {
				k := (r + i + j) % numPE
				if pe.bins[k] == "" {
					continue
				}
				s, err := b.peOne(ctx, pe.bins[k], rt)
				if err != nil {
					return fmt.Errorf("per-event round %d, %s at %s/s: %w", r+1, peNames[k], rate(rt), err)
				}
				pr.s[i][k] = s
				b.logf("per-event round %d %-4s %6s/s achieved: %d lines of %d failures; user %.0f ns + sys %.0f ns per line, %.1f%% of a core; written=%s lost=%s dropped=%s; reader %.0f ns per line",
					r+1, peNames[k], rate(s.gen.Rate()), s.lines, s.gen.Failures, s.userNs(), s.sysNs(), s.pct(),
					s.kv["written"], s.kv["lost"], s.kv["dropped"], float64(s.reader.Nanoseconds())/float64(s.readLines))
			}
		}
	}
	if b.o.skipSustain {
		return nil
	}
	return b.peSearch(ctx)
}

// peOne measures binary bin at rate for -per-event-time.
func (b *bench) peOne(ctx context.Context, bin string, r float64) (peSample, error) {
	var s peSample
	e, err := b.startPiped(ctx, bin)
	if err != nil {
		return s, err
	}
	b.noteOwn(e)
	pid := e.PID()
	l0 := e.lp.lines.Load()
	u0, s0, err := cpuTime(pid)
	if err != nil {
		e.Stop()
		return s, err
	}
	g, err := generate(ctx, b.ns, b.o.workers, r, b.o.perEventTime)
	if err != nil {
		e.Stop()
		return s, err
	}
	// The last events wait up to the flush interval: until their lines are read.
	lines := e.lp.settle(l0+g.Failures, 300*time.Millisecond, 5*time.Second) - l0
	u1, s1, err := cpuTime(pid)
	if err != nil {
		e.Stop()
		return s, err
	}
	t, err := e.Stop()
	if err != nil {
		return s, err
	}
	s = peSample{ok: lines > 0, gen: g, lines: lines, user: u1 - u0, sys: s1 - s0, kv: t.KV, note: t.Exit,
		reader: time.Duration(e.lp.cpu.Load()), readLines: e.lp.lines.Load()}
	return s, nil
}

// peSearch is the zero-loss search of both binaries, a step of each at
// every rate (the order rotating); a step loses when the kernel lost events
// or the sink dropped lines.
func (b *bench) peSearch(ctx context.Context) error {
	pe := b.pe
	var ls [numPE]*ladder
	for k := range ls {
		if pe.bins[k] != "" {
			ls[k] = newLadder(b.o.sustainRates, b.o.refine, &pe.search[k])
		}
	}
	loss := func(t totals) uint64 {
		d, _ := strconv.ParseUint(t.KV["dropped"], 10, 64)
		return t.Lost + d
	}
	for step := 0; ; step++ {
		more := false
		for j := 0; j < numPE; j++ {
			k := (step + j) % numPE
			if ls[k] == nil {
				continue
			}
			rate, ok := ls[k].next()
			if !ok {
				continue
			}
			more = true
			start := func() (session, error) { return b.startPiped(ctx, pe.bins[k]) }
			ok, g, err := b.sustainStep(ctx, "per-event "+peNames[k], start, &pe.search[k], rate, loss)
			if err != nil {
				return err
			}
			ls[k].record(rate, ok, g.Rate())
		}
		if !more {
			return nil
		}
	}
}
