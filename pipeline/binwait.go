package pipeline

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
)

// The binary analysis on the reader's side: an event's binary is asked of
// the analysers (binworker.go) as soon as the event is read, once per
// binary; the event waits for it, bounded, after its other waits; what
// never came goes out saying why, and the binary is not read again while a
// read of it, or of any file on its file system, has not returned.

// binKey is a binary: the device and inode the kernel recorded.
type binKey struct{ dev, ino uint64 }

// binWait is the reader's side of the analysis.
type binWait struct {
	d         *explain.Detector // learns what the analysers found
	w         *binWorker
	wait      time.Duration
	inflight  map[binKey]*binJob // asked, not yet learned: at most binWorkers + binQueue
	jobEvs    *eventPool         // the jobs' copies
	hold      []binHeld          // events waiting for their binary, in order
	held      *eventPool         // their copies
	maxHold   int
	due       time.Time // the earliest end of a held event's wait
	looked    uint64    // w.finished at the last look at every held event
	collected uint64    // w.finished at the last collect
	whyLate   string

	// Counters: events that waited, the longest wait (from when it began
	// to the line: the wait and how late the reader came back to it),
	// events written before their binary's analysis, binaries not asked
	// (queue full, file system stuck).
	heldN, late, skipped uint64
	waitMax              time.Duration
}

type binHeld struct {
	ev  *decode.Event
	g   *diagnose.Diagnosis
	job *binJob
	at  time.Time
}

var whyQueueFull = explain.NotAnalysed(fmt.Sprintf("%d binaries were already waiting for eaddr's %d analysers (counted as binaries_skipped; asked again in 10s)", binQueue, binWorkers))

var whyStuck = explain.NotAnalysed(fmt.Sprintf("a read of its file has not returned for %v or more: its file system does not answer (counted in binaries_stuck)", binStuck))

// newExplainStage is the explainer and its binary analysis: the Detector
// is Async, binaries are read by the analysers, never by the reader.
func newExplainStage() (*explain.Explainer, *binWait, error) {
	x, err := explain.NewExplainer()
	if err != nil {
		return nil, nil, err
	}
	x.Detector.Async = true
	return x, newBinWait(x.Detector, newBinWorker(binWorkers, binQueue, findBinary), DefaultBinaryWait), nil
}

func newBinWait(d *explain.Detector, w *binWorker, wait time.Duration) *binWait {
	return &binWait{d: d, w: w, wait: wait, inflight: map[binKey]*binJob{}, jobEvs: newEventPool(binQueue + binWorkers),
		held: newEventPool(holdMax), maxHold: holdMax,
		whyLate: explain.NotAnalysed("its analysis had not finished " + wait.String() + " after it was asked (a slow file system or a busy node); later events of this program carry it when it is done")}
}

// ask returns the job of ev's binary, asking the analysers for it first
// when it is neither known nor asked. nil: nothing to wait for (known, or
// refused: the Detector then says why).
func (b *binWait) ask(ev *decode.Event, now time.Time) *binJob {
	b.collect()
	if b.d.Known(ev) {
		return nil
	}
	k := binKey{ev.ExeDev, ev.ExeIno}
	if j := b.inflight[k]; j != nil {
		return j
	}
	if why := b.hung(ev.ExeDev, now); why != "" {
		b.skipped++
		b.d.Refuse(ev, why)
		return nil
	}
	j := &binJob{ev: b.jobEvs.copyOf(ev), asked: now}
	select {
	case b.w.jobs <- j:
	default:
		b.jobEvs.put(j.ev)
		b.skipped++
		b.d.Refuse(ev, whyQueueFull)
		return nil
	}
	b.inflight[k] = j
	return j
}

// hung says why no file of device dev is read while an analysis of one is
// stuck: any read there may not return either ("": none is).
func (b *binWait) hung(dev uint64, now time.Time) string {
	for k, j := range b.inflight {
		if k.dev == dev && j.stuck(now) {
			return explain.NotAnalysed(fmt.Sprintf("a read of another binary on the same file system (device %d:%d) has not returned for %v or more (counted in binaries_stuck), so eaddr reads none of its files meanwhile (counted as binaries_skipped)",
				unix.Major(dev), unix.Minor(dev), binStuck))
		}
	}
	return ""
}

// collect hands what the analysers found to the Detector.
func (b *binWait) collect() {
	n := b.w.finished.Load()
	if n == b.collected {
		return // a job sets done before it counts in finished
	}
	b.collected = n
	for k, j := range b.inflight {
		if j.done.Load() {
			b.d.Learn(j.ev, j.found)
			b.jobEvs.put(j.ev)
			j.ev = nil
			delete(b.inflight, k)
		}
	}
}

// stuck counts the analyses stuck in a read at now.
func (b *binWait) stuck(now time.Time) (n int) {
	for _, j := range b.inflight {
		if j.stuck(now) {
			n++
		}
	}
	return n
}

// pending is the job of ev's binary while it is not done, so that the
// event is written without it.
func (b *binWait) pending(ev *decode.Event) *binJob {
	b.collect()
	if b.d.Known(ev) {
		return nil
	}
	if j := b.inflight[binKey{ev.ExeDev, ev.ExeIno}]; j != nil && !j.done.Load() {
		return j
	}
	return nil
}

// why an event of j's binary goes out without its analysis, at now.
func (b *binWait) why(j *binJob, now time.Time) string {
	if j.stuck(now) {
		return whyStuck
	}
	return b.whyLate
}

// push keeps a copy of ev and its diagnosis until j is done or its wait
// is over; false when it is over already or the hold is full.
func (b *binWait) push(ev *decode.Event, g *diagnose.Diagnosis, j *binJob, now time.Time) bool {
	until := j.asked.Add(b.wait)
	if !now.Before(until) || len(b.hold) >= b.maxHold {
		return false
	}
	b.hold = append(b.hold, binHeld{ev: b.held.copyOf(ev), g: g, job: j, at: now})
	b.heldN++
	if b.due.IsZero() || until.Before(b.due) {
		b.due = until
	}
	return true
}

// emit writes ev once its binary is analysed, or holds it until then, at
// most the binary wait from when the binary was asked. An event that does
// not wait is written at once, after the held events that need not wait
// any more: an earlier failure of the same binary, held until the analysis
// that ev found done, goes out first (else ev overtakes it, and a retry
// reads as a fresh attempt).
func (r *traceRun) emit(ev *decode.Event, g *diagnose.Diagnosis) {
	if b := r.bins; b != nil && !ev.NodePort {
		now := r.now()
		if j := b.ask(ev, now); j != nil && !j.done.Load() && b.push(ev, g, j, now) {
			return
		}
		r.releaseBins(false)
	}
	r.write(ev, g)
}

// askBinary asks for ev's binary as soon as it is read, when the event
// will be written: no filter waits for its names, and the others keep it.
// Its analysis then runs while it waits for its names and its diagnosis.
func (r *traceRun) askBinary(ev *decode.Event) {
	if r.bins == nil || ev.NodePort || !r.c.keepsBeforeNames(ev) {
		return
	}
	r.bins.ask(ev, r.now())
}

// keepsBeforeNames reports whether the filters keep ev before its pod is
// known: false when a pod filter waits for the names, or one drops it.
func (c *Config) keepsBeforeNames(ev *decode.Event) bool {
	if c.Namespace != "" || c.Pod != "" || c.Container != "" || c.Selector != nil {
		return false
	}
	keep, _ := c.keep(ev)
	return keep
}

// explainEvent fills r.x for ev: from its binary's analysis, or saying why
// there is none yet.
func (r *traceRun) explainEvent(ev *decode.Event) {
	full := r.c.Explain == 2
	if b := r.bins; b != nil {
		if j := b.pending(ev); j != nil {
			b.late++
			r.explainer.ExplainPending(ev, &r.x, full, b.why(j, r.now()))
			return
		}
	}
	r.explainer.Explain(ev, &r.x, full)
}

// releaseBins writes the held events whose binary is analysed or whose
// wait is over (all when final), in order. Without a new analysis done
// only the wait's end is looked at.
func (r *traceRun) releaseBins(final bool) {
	b := r.bins
	if b == nil || len(b.hold) == 0 {
		return
	}
	now := r.now()
	done := b.w.finished.Load()
	if !final && done == b.looked && now.Before(b.due) {
		return
	}
	b.collect()
	b.looked, b.due = done, time.Time{}
	kept := b.hold[:0]
	for _, h := range b.hold {
		until := h.job.asked.Add(b.wait)
		if !final && !h.job.done.Load() && now.Before(until) {
			kept = append(kept, h)
			if b.due.IsZero() || until.Before(b.due) {
				b.due = until
			}
			continue
		}
		b.waitMax = max(b.waitMax, now.Sub(h.at))
		r.write(h.ev, h.g)
		b.held.put(h.ev)
	}
	clear(b.hold[len(kept):])
	b.hold = kept
}

// drainBins waits, within the binary wait, for the analyses of the events
// still held at stop, then writes them all.
func (r *traceRun) drainBins() {
	if r.bins == nil {
		return
	}
	for deadline := time.Now().Add(r.bins.wait); len(r.bins.hold) > 0 && time.Now().Before(deadline); time.Sleep(holdPoll) {
		r.releaseBins(false)
	}
	r.releaseBins(true)
}
