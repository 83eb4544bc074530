package top

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eaddr/eaddr/ports"
)

// Once writes one snapshot to w, a table of lines at most width columns
// or (asJSON) one line of JSON. With interval > 0 it takes two samples
// interval apart, so that the trend and the time to exhaustion are told
// from two; with 0, one sample, and they say why they are not known.
func Once(ctx context.Context, s *Sampler, m *Model, interval time.Duration, asJSON bool, width int, w io.Writer) error {
	n := 1
	if interval > 0 {
		n = 2
	}
	for i := range n {
		if i > 0 && !sleep(ctx, interval) {
			return ctx.Err()
		}
		smp, err := s.Sample()
		if err != nil {
			return err
		}
		m.Add(smp)
	}
	text, err := render(m, Header{Interval: interval, Width: width}, interval, asJSON)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, text)
	return err
}

// render is the newest sample as a table with h's header or a line of
// JSON; wait is the time before the next sample.
func render(m *Model, h Header, wait time.Duration, asJSON bool) (string, error) {
	if asJSON {
		b, err := m.JSON(wait)
		return string(b) + "\n", err
	}
	return strings.Join(m.Table(h), "\n") + "\n", nil
}

// Plain writes a table of lines at most width columns (or, asJSON, a line
// of JSON) every interval until ctx is done: for a pipe or a file, no
// escape codes, a blank line between tables. The wait after a sample is ports.Pace's: interval, or longer after
// a sample that took more than 1/ports.TopShare of it.
func Plain(ctx context.Context, s *Sampler, m *Model, interval time.Duration, asJSON bool, width int, w io.Writer) error {
	for wait := time.Duration(0); ; {
		if wait > 0 && !sleep(ctx, wait) {
			return nil
		}
		smp, err := s.Sample()
		if err != nil {
			return err
		}
		m.Add(smp)
		first := wait == 0
		wait = ports.Pace(interval, smp.Took, ports.TopShare)
		text, err := render(m, Header{Interval: interval, Paced: true, Width: width}, wait, asJSON)
		if err != nil {
			return err
		}
		if !first && !asJSON {
			text = "\n" + text
		}
		if _, err := io.WriteString(w, text); err != nil {
			return fmt.Errorf("writing the table: %w", err)
		}
	}
}

// sleep waits d; false when ctx is done first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
