package main

import (
	"slices"
	"testing"
)

// run drives l with a tracer that loses above lossAt and a generator that
// reaches at most ceiling; it returns the rates stepped.
func runLadder(l *ladder, lossAt, ceiling float64) []float64 {
	var steps []float64
	for rate, more := l.next(); more; rate, more = l.next() {
		steps = append(steps, rate)
		if len(steps) > 50 {
			break
		}
		got := min(rate, ceiling)
		l.record(rate, got <= lossAt, got)
	}
	return steps
}

// The zero-loss search's plan is the one sustain always followed: climb,
// bisect twice after the first loss, retry once a step the generator fell
// short of, and stop there when it falls short again.
func TestLadder(t *testing.T) {
	rates := []float64{50, 100, 150, 200}
	var r sustainResult
	if got, want := runLadder(newLadder(rates, 2, &r), 120, 1000), []float64{50, 100, 150, 125, 112.5}; !slices.Equal(got, want) {
		t.Errorf("loss above 120: steps %v, want %v", got, want)
	}
	if r.firstLoss != 125 || r.generatorBound || r.neverLost {
		t.Errorf("loss above 120: %+v, want firstLoss 125", r)
	}
	r = sustainResult{}
	if got, want := runLadder(newLadder(rates, 2, &r), 1000, 120), []float64{50, 100, 150, 150}; !slices.Equal(got, want) {
		t.Errorf("generator ceiling 120: steps %v, want %v", got, want)
	}
	if !r.generatorBound || r.firstLoss != 0 {
		t.Errorf("generator ceiling 120: %+v, want generatorBound", r)
	}
	r = sustainResult{}
	if got := runLadder(newLadder(rates, 2, &r), 1000, 1000); !slices.Equal(got, rates) || !r.neverLost {
		t.Errorf("no loss: steps %v, %+v; want the ladder and neverLost", got, r)
	}
	r = sustainResult{}
	if got, want := runLadder(newLadder(rates, 2, &r), 10, 1000), []float64{50, 25, 12.5}; !slices.Equal(got, want) || r.firstLoss != 12.5 {
		t.Errorf("loss at every rate: steps %v (%+v), want %v", got, r, want)
	}
}
