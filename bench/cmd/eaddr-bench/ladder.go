package main

// ladder is the plan of a zero-loss search: climb the rates until a step
// loses events or the generator falls short of its target (twice: the host
// may have been busy for a moment), then bisect between the last rate
// without loss and the first with loss. It only decides which rate comes
// next; the caller runs the steps, so that two searches can be interleaved
// step by step (the per-event section's new and base binaries).
type ladder struct {
	rates    []float64
	refine   int
	res      *sustainResult
	i        int     // the climb's next rate
	retried  bool    // rates[i] was run once and fell short
	good     float64 // the climb's last rate without loss
	lo, hi   float64 // the bisection's bounds
	bisected int     // bisection steps done
	climbing bool
	done     bool
}

func newLadder(rates []float64, refine int, res *sustainResult) *ladder {
	return &ladder{rates: rates, refine: refine, res: res, climbing: true, done: len(rates) == 0}
}

// next is the rate of the next step; false when the search is over.
func (l *ladder) next() (float64, bool) {
	switch {
	case l.done:
		return 0, false
	case l.climbing:
		return l.rates[l.i], true
	case l.lo == 0:
		return l.hi / 2, true
	}
	return (l.lo + l.hi) / 2, true
}

// record takes the outcome of the step at rate (from next): whether it lost
// nothing, and the rate the generator achieved.
func (l *ladder) record(rate float64, ok bool, got float64) {
	if !l.climbing {
		if ok {
			l.lo = rate
		} else {
			l.hi, l.res.firstLoss = rate, rate
		}
		l.bisected++
		l.done = l.bisected >= l.refine
		return
	}
	short := got < 0.9*rate
	if ok && short && !l.retried {
		l.retried = true // once more before calling it the ceiling
		return
	}
	l.retried = false
	switch {
	case !ok:
		l.res.firstLoss = rate
		l.climbing, l.lo, l.hi = false, l.good, rate
		l.done = l.refine <= 0
	case short: // the generator cannot go faster
		l.good, l.res.generatorBound, l.done = rate, true, true
	default:
		l.good = rate
		l.i++
		if l.i == len(l.rates) { // the ladder ended without a loss
			l.res.neverLost, l.done = true, true
		}
	}
}
