package pipeline

import (
	"sync/atomic"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// The binary analysis on goroutines of its own: explain's Finder opens and
// reads the failing program's executable, which takes as long as its file
// system does, and a FUSE daemon or a network file system that does not
// answer makes one read never return. The reader hands the analysers jobs
// and never waits for them (binwait.go).

const (
	// DefaultBinaryWait is the longest an event waits for the analysis of
	// its program's binary, from when it was asked; then it goes out
	// naming no client and saying why, and later events of that binary
	// carry the analysis once it is done. It is explain's own budget for
	// reading one binary, which an analysis that reads at all keeps to.
	DefaultBinaryWait = time.Second
	// binWorkers analyse binaries, one each at a time: a read that never
	// returns holds one of them, never the reader, and no more goroutines
	// are started for others.
	binWorkers = 4
	// binQueue bounds the binaries waiting for an analyser; past it a
	// binary is not analysed (counted as binaries_skipped), and asked again
	// after the Detector's NegativeTTL.
	binQueue = 64
	// binStuck: an analysis that has not ended this long after it started
	// is in one read or open that has not returned (explain checks its own
	// 1 s budget between reads): its file system is not answering.
	binStuck = 5 * time.Second
)

// binJob is the analysis of one binary.
type binJob struct {
	ev    *decode.Event // a copy, the analyser's until done
	asked time.Time     // by the reader's clock
	// started is when an analyser took it (UnixNano by the analysers'
	// clock; 0: still queued); done is set once found is.
	started atomic.Int64
	done    atomic.Bool
	found   explain.Found
}

// binWorker runs the analysers.
type binWorker struct {
	jobs     chan *binJob
	finished atomic.Uint64 // jobs done
	now      func() time.Time
}

// newBinWorker starts n analysers, each with a find of its own, taking
// jobs from a queue of queue.
func newBinWorker(n, queue int, newFind func() func(*decode.Event) explain.Found) *binWorker {
	w := &binWorker{jobs: make(chan *binJob, queue), now: time.Now}
	for range n {
		go w.run(newFind())
	}
	return w
}

// findBinary is the analysers' find in a trace: a Finder each.
func findBinary() func(*decode.Event) explain.Found { return explain.NewFinder().Find }

func (w *binWorker) run(find func(*decode.Event) explain.Found) {
	for j := range w.jobs {
		j.started.Store(w.now().UnixNano())
		j.found = find(j.ev)
		j.done.Store(true)
		w.finished.Add(1)
	}
}

// close lets the analysers end once the queue is empty; one stuck in a
// read is left to it (the kernel holds it there), not waited for.
func (w *binWorker) close() { close(w.jobs) }

// stuck reports whether j's analysis has been in one read or open for
// binStuck at now.
func (j *binJob) stuck(now time.Time) bool {
	s := j.started.Load()
	return s != 0 && !j.done.Load() && now.UnixNano()-s >= int64(binStuck)
}
