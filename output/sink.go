package output

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Sink hands batches of output lines to a writer goroutine through a
// bounded queue, so a slow or stalled consumer of stdout never blocks the
// ring buffer reader and never makes eaddr grow: when the queue is full the
// batch is dropped and counted. Buffers circulate between the reader and
// the writer; the steady state allocates nothing.
//
// Only whole records are written, and delivered counts the events whose
// record write(2) took in full. Into a pipe (how kubelet, log shippers and
// `| jq` read eaddr), records go in one write of up to the pipe's capacity
// when it is empty (a reader that keeps up), which the kernel takes at
// once, else in writes of at most PIPE_BUF bytes, which it takes whole or
// not at all; a larger record waits until the pipe is empty. The pipe is reopened non-blocking (its own open file,
// not stdout's shared one), so that on shutdown a write that a stuck
// reader does not take is abandoned at a deadline, having written nothing:
// its events count as dropped and no half line is left behind. Other
// outputs (a file, a terminal) are written in one write per batch; on
// shutdown a write still blocked after the timeout counts as dropped.
type Sink struct {
	out       io.Writer
	pipe      *os.File // out reopened O_NONBLOCK when it is a pipe, else nil
	batch     int      // flush a batch at this size
	cur       outBatch
	full      chan outBatch
	free      chan outBatch
	spare     int // buffers not made yet: they are made when first needed
	done      chan struct{}
	closing   atomic.Bool   // close's timeout passed: give up waiting
	abandoned atomic.Bool   // close stopped counting the writer's events
	queued    atomic.Uint64 // events handed to the writer and not yet written or dropped
	delivered atomic.Uint64 // events whose record was written whole
	dropped   atomic.Uint64 // events not written: queue full, reader gone, or shutdown
	writes    atomic.Uint64 // write(2) calls begun (Go's Write may finish one in more)
	failed    bool          // writer only: out failed or was abandoned; drop the rest
	closed    sync.Once
	errMu     sync.Mutex
	err       error // first write error
	onError   func()
}

// outBatch is records laid end to end; ends[i] is where record i ends,
// and events[i] how many events it carries (0 for a header or summary).
type outBatch struct {
	data   []byte
	ends   []int
	events []uint8
	n      uint64 // events in the batch
}

func (b *outBatch) reset() {
	b.data, b.ends, b.events, b.n = b.data[:0], b.ends[:0], b.events[:0], 0
}

// pipeBuf is PIPE_BUF: a write to a pipe of at most this many bytes is
// atomic (pipe(7)).
const pipeBuf = 4096

// NewSink starts the writer. depth batches of batchBytes may wait; onError
// runs (once, from the writer) when a write fails.
func NewSink(out io.Writer, batchBytes, depth int, onError func()) *Sink {
	s := &Sink{out: out, batch: batchBytes, full: make(chan outBatch, depth), free: make(chan outBatch, depth+1),
		done: make(chan struct{}), onError: onError, spare: depth}
	s.cur = s.newBatch()
	if f, ok := out.(*os.File); ok {
		s.pipe = reopenPipe(f)
	}
	go s.write()
	return s
}

func (s *Sink) newBatch() outBatch {
	return outBatch{data: make([]byte, 0, s.batch+4096), ends: make([]int, 0, 256), events: make([]uint8, 0, 256)}
}

// reopenPipe opens f again, non-blocking, when it is a pipe or FIFO: a new
// open file, so stdout's own flags (shared with the shell or whoever else
// holds it) stay as they are. nil when f is no pipe or cannot be reopened.
func reopenPipe(f *os.File) *os.File {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	path := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name()) // non-blocking: Go's poller, so deadlines work
}

func (s *Sink) write() {
	defer close(s.done)
	for b := range s.full {
		s.writeBatch(&b)
		b.reset()
		s.free <- b
	}
}

// writeBatch writes b's records in chunks and counts each record's events
// delivered if its bytes were all written, dropped otherwise.
func (s *Sink) writeBatch(b *outBatch) {
	off := 0 // b.data before off is written or given up
	for i := 0; i < len(b.ends); {
		j := i + 1 // records i..j-1 go in one write
		whole := s.pipe == nil
		if whole {
			j = len(b.ends)
		} else {
			limit := pipeBuf
			if room := s.emptyRoom(); room > 0 && !s.failed {
				limit, whole = room, true
			}
			for j < len(b.ends) && b.ends[j]-off <= limit {
				j++
			}
			whole = whole && b.ends[j-1]-off <= limit
		}
		n := 0
		if !s.failed {
			n = s.writeChunk(b.data[off:b.ends[j-1]], whole)
		}
		for ; i < j; i++ {
			s.settle(uint64(b.events[i]), b.ends[i] <= off+n)
		}
		off = b.ends[j-1]
	}
}

// settle counts n events delivered or dropped, unless close gave up on
// the writer and counted them already.
func (s *Sink) settle(n uint64, written bool) {
	if n == 0 || s.abandoned.Load() {
		return
	}
	if written {
		s.delivered.Add(n)
	} else {
		s.dropped.Add(n)
	}
	s.queued.Add(^(n - 1))
}

// emptyRoom is how many bytes one write puts into the pipe whole, now: its
// capacity when it is empty, else 0. pipe_write (fs/pipe.c) fills a free
// slot of the ring per page and stops only when every slot is taken, and
// an empty pipe has them all free (F_GETPIPE_SZ is slots × PAGE_SIZE), so
// a write of up to the capacity goes in at once. eaddr is the pipe's only
// writer (a container's stdout, a pipe into a shell command); another
// writer could take room between this and the write, whose rest Go's
// Write then finishes when the reader makes room.
func (s *Sink) emptyRoom() int {
	fd := s.pipe.Fd()
	if n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err != nil || n != 0 {
		return 0
	}
	capacity, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return 0
	}
	return capacity
}

// writeChunk writes p and returns how many bytes went out. whole: p fits
// the pipe's room already (emptyRoom), or p is not for a pipe.
func (s *Sink) writeChunk(p []byte, whole bool) int {
	s.writes.Add(1)
	if s.pipe == nil {
		n, err := s.out.Write(p)
		if err != nil {
			s.fail(err)
		}
		return n
	}
	if !whole && len(p) > pipeBuf && !s.waitEmpty(len(p)) {
		return 0 // cannot be written whole
	}
	n, err := s.pipe.Write(p)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded): // shutdown: the reader did not take it
		s.failed = true
	default:
		s.fail(err)
	}
	return n
}

// waitEmpty waits until the pipe is empty, so that a record larger than
// PIPE_BUF goes in whole; a record larger than the pipe grows it first.
// false on shutdown or when the record cannot fit.
func (s *Sink) waitEmpty(size int) bool {
	fd := int(s.pipe.Fd())
	capacity, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err == nil && size > capacity {
		capacity, err = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, size)
	}
	if err != nil || size > capacity {
		return false
	}
	// A reader that keeps up empties the pipe within microseconds: poll
	// fast first, then back off to a few milliseconds for a slow one.
	for pause := 20 * time.Microsecond; !s.closing.Load(); pause = min(2*pause, 5*time.Millisecond) {
		if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil || n == 0 { // TIOCINQ is FIONREAD: bytes in the pipe
			return err == nil
		}
		time.Sleep(pause)
	}
	s.failed = true
	return false
}

func (s *Sink) fail(err error) {
	s.failed = true
	s.errMu.Lock()
	s.err = err
	s.errMu.Unlock()
	if s.onError != nil {
		s.onError()
	}
}

// Buf returns the current batch to append one record to.
func (s *Sink) Buf() []byte { return s.cur.data }

// Add takes back the batch with one more record appended, carrying n
// events (0 for a header or summary), and hands it on when it is large.
func (s *Sink) Add(b []byte, n uint64) {
	s.cur.data = b
	if len(s.cur.ends) > 0 && s.cur.ends[len(s.cur.ends)-1] == len(b) {
		return // nothing appended
	}
	s.cur.ends = append(s.cur.ends, len(b))
	s.cur.events = append(s.cur.events, uint8(n))
	s.cur.n += n
	if len(s.cur.data) >= s.batch {
		s.Flush()
	}
}

// Flush hands the current batch to the writer, or drops it (counted) when
// the queue is full.
func (s *Sink) Flush() {
	if len(s.cur.ends) == 0 {
		return
	}
	var next outBatch
	select {
	case next = <-s.free:
	default:
		if s.spare > 0 { // the queue grows only when stdout falls behind
			s.spare--
			next = s.newBatch()
		}
	}
	if next.data == nil { // depth batches wait already: drop this one, counted
		s.dropped.Add(s.cur.n)
		s.cur.reset()
		return
	}
	s.queued.Add(s.cur.n)
	s.full <- s.cur
	s.cur = next
}

// Close hands on the last batch and waits up to timeout for the writer to
// finish. Past it, a pipe write in progress is abandoned (it wrote nothing)
// and what is left counts as dropped; another output's write cannot be
// abandoned, and what it still holds counts as dropped.
func (s *Sink) Close(timeout time.Duration) {
	s.closed.Do(func() {
		s.Flush()
		close(s.full)
		select {
		case <-s.done:
		case <-time.After(timeout):
			if s.pipe == nil {
				s.abandoned.Store(true)
				s.dropped.Add(s.queued.Load())
				return
			}
			s.closing.Store(true)
			s.pipe.SetWriteDeadline(time.Now())
			<-s.done
		}
		if s.pipe != nil {
			s.pipe.Close()
		}
	})
}

// Err is the first write error.
func (s *Sink) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Spare is how many batches the queue may still make: each is made when
// stdout falls behind, until depth batches wait.
func (s *Sink) Spare() int { return s.spare }

// Batches is how many batches the queue has made (each batchBytes, kept for
// good) and the most it makes: the memory stdout's backlog has taken.
func (s *Sink) Batches() (made, depth int) { return cap(s.full) - s.spare, cap(s.full) }

// Delivered counts the events whose record was written whole.
func (s *Sink) Delivered() uint64 { return s.delivered.Load() }

// Dropped counts the events not written: the queue was full, the reader
// went away, or the shutdown's timeout passed.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }
