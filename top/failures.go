package top

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/tracer"
)

// FailureCounter counts, per netns, the connect() and bind() calls that
// fail with EADDRNOTAVAIL or EADDRINUSE, with eaddr's tracer. Its reader
// only counts; Counts copies the counts under a lock, once per interval.
type FailureCounter struct {
	t     *tracer.Tracer
	since time.Time
	mu    sync.Mutex
	n     map[uint64]uint64
	err   error  // the reader's, when it stopped on its own
	lost  uint64 // events the kernel dropped (the reader reads the tracer's stats: it is not safe beside Read)
	done  chan struct{}
}

// wakeEvents is how many events wake the reader: it polls besides, so a
// lone failure is counted within pollEvery.
const (
	wakeEvents = 64
	pollEvery  = 250 * time.Millisecond
)

// StartFailureCounter attaches the tracer and starts counting; Close
// detaches it.
func StartFailureCounter(log *slog.Logger) (*FailureCounter, error) {
	t, err := tracer.New(tracer.Options{
		Errnos:      []int{int(unix.EADDRNOTAVAIL), int(unix.EADDRINUSE)},
		RingSize:    1 << 20,
		WakeupBytes: wakeEvents * tracer.RawEventSize,
		Logger:      log,
	})
	if err != nil {
		return nil, err
	}
	c := &FailureCounter{t: t, since: time.Now(), n: map[uint64]uint64{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

func (c *FailureCounter) read() {
	defer close(c.done)
	var ev tracer.RawEvent
	statsAt := time.Now()
	for {
		c.t.SetDeadline(time.Now().Add(pollEvery))
		err := c.t.Read(&ev)
		c.mu.Lock()
		switch {
		case err == nil:
			c.n[uint64(ev.Netns)]++
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, tracer.ErrClosed):
			c.mu.Unlock()
			return
		default:
			c.err = err
			c.mu.Unlock()
			return
		}
		if now := time.Now(); now.Sub(statsAt) >= pollEvery {
			statsAt = now
			if st, err := c.t.Stats(); err != nil {
				c.err = err
			} else {
				c.lost = st.KernelLost
			}
		}
		c.mu.Unlock()
	}
}

// Counts implements Counter: nil with why once the reader failed, or when
// the kernel dropped events (the counts would be short).
func (c *FailureCounter) Counts() (map[uint64]uint64, time.Time, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.since, "reading the tracer's events failed: " + c.err.Error()
	}
	if c.lost > 0 {
		return nil, c.since, fmt.Sprintf("the kernel dropped %d events, so the counts would be short", c.lost)
	}
	out := make(map[uint64]uint64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out, c.since, ""
}

// Close detaches the tracer and waits for its reader.
func (c *FailureCounter) Close() error {
	c.t.Stop()
	<-c.done
	return c.t.Close()
}
