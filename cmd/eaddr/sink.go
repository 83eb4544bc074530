package main

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// sink hands batches of output lines to a writer goroutine through a
// bounded queue, so a slow or stalled consumer of stdout never blocks the
// ring buffer reader and never makes eaddr grow: when the queue is full the
// batch is dropped and counted. Buffers circulate between the reader and
// the writer; the steady state allocates nothing.
type sink struct {
	out     io.Writer
	batch   int // flush a batch at this size
	cur     []byte
	curN    uint64 // events in cur
	full    chan outBatch
	free    chan []byte
	spare   int // buffers not made yet: they are made when first needed
	done    chan struct{}
	queued  atomic.Uint64 // events handed to the writer and not yet written
	dropped atomic.Uint64 // events dropped because the queue was full
	closed  sync.Once
	errMu   sync.Mutex
	err     error // first write error
	onError func()
}

type outBatch struct {
	data []byte
	n    uint64
}

// newSink starts the writer. depth batches of batchBytes may wait; onError
// runs (once, from the writer) when a write fails.
func newSink(out io.Writer, batchBytes, depth int, onError func()) *sink {
	s := &sink{out: out, batch: batchBytes, full: make(chan outBatch, depth), free: make(chan []byte, depth+1),
		done: make(chan struct{}), onError: onError, cur: make([]byte, 0, batchBytes+4096), spare: depth}
	go s.write()
	return s
}

func (s *sink) write() {
	defer close(s.done)
	failed := false
	for b := range s.full {
		if !failed {
			if _, err := s.out.Write(b.data); err != nil {
				failed = true
				s.errMu.Lock()
				s.err = err
				s.errMu.Unlock()
				if s.onError != nil {
					s.onError()
				}
			}
		}
		if failed { // nobody reads any more: what is left is dropped
			s.dropped.Add(b.n)
		}
		s.queued.Add(^(b.n - 1))
		s.free <- b.data[:0]
	}
}

// buf returns the current batch to append one record to.
func (s *sink) buf() []byte { return s.cur }

// add takes back the batch with n more records appended, and hands it on
// when it is large.
func (s *sink) add(b []byte, n uint64) {
	s.cur = b
	s.curN += n
	if len(s.cur) >= s.batch {
		s.flush()
	}
}

// flush hands the current batch to the writer, or drops it (counted) when
// the queue is full.
func (s *sink) flush() {
	if s.curN == 0 && len(s.cur) == 0 {
		return
	}
	var next []byte
	select {
	case next = <-s.free:
	default:
		if s.spare > 0 { // the queue grows only when stdout falls behind
			s.spare--
			next = make([]byte, 0, s.batch+4096)
		}
	}
	if next == nil { // depth batches wait already: drop this one, counted
		s.dropped.Add(s.curN)
		s.cur, s.curN = s.cur[:0], 0
		return
	}
	s.queued.Add(s.curN)
	s.full <- outBatch{s.cur, s.curN}
	s.cur, s.curN = next, 0
}

// close hands on the last batch and waits up to timeout for the writer to
// finish; what it could not write by then counts as dropped.
func (s *sink) close(timeout time.Duration) {
	s.closed.Do(func() {
		s.flush()
		close(s.full)
		select {
		case <-s.done:
		case <-time.After(timeout):
			s.dropped.Add(s.queued.Load())
		}
	})
}

// Err is the first write error.
func (s *sink) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}
