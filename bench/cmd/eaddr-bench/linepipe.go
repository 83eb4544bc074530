package main

import (
	"bytes"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// linePipe is a tracer's stdout as a pipe that this driver drains, counting
// lines: the tracer writes whole lines into a pipe, as under kubelet or a
// log shipper, not into /dev/null (whose write costs nothing). The reader
// is one thread reading up to 1 MiB at a time from a 1 MiB pipe and counting newlines; its own CPU
// time is kept, to show what draining costs the machine beside the tracer.
type linePipe struct {
	w            *os.File // the tracer's stdout; closed by closeWriter once it has started
	r            *os.File
	lines, bytes atomic.Uint64
	cpu          atomic.Int64 // the reader thread's CPU time, ns, when it ended
	done         chan struct{}
}

// pipeSize is the capacity of a linePipe.
const pipeSize = 1 << 20

func newLinePipe() (*linePipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// 1 MiB rather than the default 64 KiB: fewer wakeups of the reader, so
	// that it keeps up at 100k lines/s on a busy 2-CPU host (eaddr writes
	// PIPE_BUF-sized chunks into a pipe all the same).
	unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, pipeSize)
	p := &linePipe{r: r, w: w, done: make(chan struct{})}
	go p.drain()
	return p, nil
}

func (p *linePipe) drain() {
	runtime.LockOSThread() // threadCPU is this reader's alone
	defer runtime.UnlockOSThread()
	defer close(p.done)
	defer p.r.Close()
	c0 := threadCPU()
	buf := make([]byte, 1<<20)
	for {
		n, err := p.r.Read(buf)
		p.lines.Add(uint64(bytes.Count(buf[:n], []byte{'\n'})))
		p.bytes.Add(uint64(n))
		if err != nil {
			if err != io.EOF {
				io.Copy(io.Discard, p.r)
			}
			p.cpu.Store(int64(threadCPU() - c0))
			return
		}
	}
}

// closeWriter closes the driver's copy of the write end (the tracer holds
// its own), so that the reader sees EOF when the tracer exits.
func (p *linePipe) closeWriter() { p.w.Close() }

// wait waits for the reader to see EOF (the tracer has exited), at most d.
func (p *linePipe) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// settle waits until want lines have been read, or until none came for
// quiet, or max passed; it returns the lines read.
func (p *linePipe) settle(want uint64, quiet, max time.Duration) uint64 {
	deadline := time.Now().Add(max)
	last, lastAt := p.lines.Load(), time.Now()
	for {
		n := p.lines.Load()
		if n >= want || time.Now().After(deadline) {
			return n
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) >= quiet {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
