package top

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"github.com/eaddr/eaddr/ports"
)

// Key is what a key press does in the interactive view.
type Key int

const (
	KeyNone Key = iota
	KeyQuit
	KeySortNext
	KeySortPrev
	KeyPause
)

// KeyOf maps a byte read from the terminal: q (or Ctrl-C, as raw mode
// turns it into a byte, not SIGINT) quits, s or > and < cycle the sort,
// p or space pauses.
func KeyOf(b byte) Key {
	switch b {
	case 'q', 'Q', 3:
		return KeyQuit
	case 's', 'S', '>':
		return KeySortNext
	case '<':
		return KeySortPrev
	case 'p', 'P', ' ':
		return KeyPause
	}
	return KeyNone
}

// result is a sample or the error that stopped sampling.
type result struct {
	s   Sample
	err error
}

// Interactive shows the view on the terminal out, redrawn every interval
// and on each key read from in, until q, ctx is done (SIGINT, SIGTERM) or
// an error; the terminal is restored in every case.
func Interactive(ctx context.Context, s *Sampler, m *Model, interval time.Duration, in, out *os.File) error {
	sc, err := openScreen(in, out)
	if err != nil {
		return err
	}
	defer sc.restore()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var paused atomic.Bool
	samples := make(chan result, 1)
	go sampleEvery(ctx, s, interval, &paused, samples, sleep)
	keys := readKeys(in)
	h := Header{Interval: interval, Paced: true, Keys: true, FirstDetails: true}
	if err := sc.draw([]string{"eaddr top: taking the first sample..."}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-samples:
			if r.err != nil {
				return r.err
			}
			if paused.Load() {
				continue // taken before the pause: the numbers stay
			}
			m.Add(r.s)
		case k, ok := <-keys:
			if !ok || k == KeyQuit {
				return nil
			}
			handleKey(k, m, &paused)
		}
		h.Paused = paused.Load()
		if m.Last().At.IsZero() {
			continue
		}
		h.Width = sc.width()
		if err := sc.draw(m.Table(h)); err != nil {
			return err
		}
	}
}

// handleKey sorts or pauses.
func handleKey(k Key, m *Model, paused *atomic.Bool) {
	switch k {
	case KeySortNext:
		m.Sort = m.Sort.Next(1)
	case KeySortPrev:
		m.Sort = m.Sort.Next(-1)
	case KeyPause:
		paused.Store(!paused.Load())
	}
}

// sampleEvery samples, then waits ports.Pace(interval, the sample's time) with
// sleep (tests pass their own), but does not sample while paused, until
// ctx is done.
func sampleEvery(ctx context.Context, s *Sampler, interval time.Duration, paused *atomic.Bool, out chan<- result,
	sleep func(context.Context, time.Duration) bool) {
	wait := interval
	for {
		if !paused.Load() {
			smp, err := s.Sample()
			select {
			case out <- result{smp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			wait = ports.Pace(interval, smp.Took, ports.TopShare)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// readKeys sends the keys read from in; closed at end of input or error.
// The goroutine is left blocked in read when the view ends: eaddr exits.
func readKeys(in *os.File) <-chan Key {
	keys := make(chan Key, 16)
	go func() {
		defer close(keys)
		var b [64]byte
		for {
			n, err := in.Read(b[:])
			for _, c := range b[:n] {
				if k := KeyOf(c); k != KeyNone {
					keys <- k
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return keys
}
