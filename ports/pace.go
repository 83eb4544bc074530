package ports

import (
	"context"
	"fmt"
	"time"
)

// Shares of a core a sampler may take, as 1/share: trace's sampler runs
// all day (1%), top while someone watches (10%).
const (
	TraceShare = 100
	TopShare   = 10
)

// Pace is the wait after a sample that took took: every, or share times
// took when that is longer, so that sampling takes at most 1/share of a
// core. took is the sample's wall time, at least its CPU time (one
// goroutine, and the walk's time in the kernel on it): on a loaded node it
// stretches early rather than late.
func Pace(every, took time.Duration, share int) time.Duration {
	return max(every, time.Duration(share)*took)
}

// Start samples every every (paced by share) on a goroutine of its own
// until ctx is done or stop is called, handing each sample to publish on
// that goroutine, with the wait before the next; a failed sample is
// logged. stop waits for a sample in progress to end.
func (s *Sampler) Start(ctx context.Context, every time.Duration, share int, publish func(*Sample, time.Duration)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := s.once(every, every, share, publish)
		for {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				wait = s.once(every, wait, share, publish)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// once takes one sample and publishes it. It returns the wait before the
// next, saying so when it changes from last.
func (s *Sampler) once(every, last time.Duration, share int, publish func(*Sample, time.Duration)) time.Duration {
	start := s.now()
	p, err := s.Sample()
	took := s.now().Sub(start)
	if err == nil {
		took = p.Took
	}
	wait := Pace(every, took, share)
	switch {
	case err != nil:
		s.c.Log.Warn("port sampler: cannot read the network namespaces", "err", err)
	default:
		if p.Skipped > 0 {
			s.c.Log.Debug("port sampler: netns skipped", "skipped", p.Skipped)
		}
		if p.Cut > 0 {
			s.c.Log.Warn("port sampler: the node walk could not read some of the TCP hash tables (chains changing under it): counts may be low this sample", "cut", p.Cut)
		}
		publish(p, wait)
	}
	if wait != last && (wait > every || last > every) {
		s.c.Log.Info("port sampler: sampling every "+wait.Round(time.Second).String()+" to stay within "+fmt.Sprint(100/share)+"% of a core",
			"sample_took", took.Round(time.Millisecond).String(), "interval", every.String())
	}
	return wait
}
