package pipeline

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/tracer"
)

// loop reads until the tracer is stopped and drained.
func (r *traceRun) loop() error {
	wait := r.c.Flush
	if wait == 0 && (r.met != nil || r.sum.enabled || r.limits.on) {
		wait = time.Second
	}
	r.lastTick = r.now()
	r.beat(r.lastTick)
	for {
		if d := r.readWait(wait); d > 0 {
			r.t.SetDeadline(time.Now().Add(d))
		} else {
			r.t.SetDeadline(time.Time{}) // a poll deadline may be left from held events
		}
		err := r.t.Read(&r.raw)
		r.beat(r.now())
		if errors.Is(err, tracer.ErrClosed) {
			r.release(true)
			r.drainDiag()
			r.drainBins()
			return nil
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("reading events: %w", err)
		}
		if err == nil {
			r.handle(&r.raw)
		}
		r.release(false)
		r.releaseDiag(false)
		r.releaseBins(false)
		if r.t.Pending() == 0 || err != nil { // drained: hand the batch on
			r.sk.Flush()
		}
		if now := r.now(); wait > 0 && now.Sub(r.lastTick) >= wait { // a busy ring never times out
			r.lastTick = now
			r.tick(now)
		}
	}
}

// readerStall is how long the reader may stay away from the ring before
// /healthz says it stalled: well past the longest a Read waits (the flush
// interval; a second without one, as metrics make it) and what it does
// between two (nothing on its path waits on a file or a socket).
func readerStall(flush time.Duration) time.Duration {
	return max(30*time.Second, 3*max(flush, time.Second))
}

// beat tells /healthz that the reader came back from the ring at now.
func (r *traceRun) beat(now time.Time) {
	if r.met != nil {
		r.met.readAt.Store(now.UnixNano())
	}
}

// readWait is how long a Read may block: the flush interval, shorter while
// events wait for names. 0: no deadline.
func (r *traceRun) readWait(wait time.Duration) time.Duration {
	if len(r.hold.q) == 0 && len(r.diagHold) == 0 && (r.bins == nil || len(r.bins.hold) == 0) {
		return wait
	}
	if wait == 0 || wait > holdPoll {
		return holdPoll
	}
	return wait
}

// handle decodes and attributes one event, the only Decode of its way;
// one whose names were asked of the runtime waits in the hold queue, the
// others go on at once.
func (r *traceRun) handle(raw *tracer.RawEvent) {
	ev := &r.ev
	r.dec.Decode(raw, ev)
	if r.diag != nil && !r.seenNetNS[ev.NetNS] {
		// Now, while the process lives: the netns stays reachable.
		if len(r.seenNetNS) >= 4096 {
			clear(r.seenNetNS)
		}
		r.seenNetNS[ev.NetNS] = true
		r.diag.seen(ev)
	}
	r.askBinary(ev)
	if r.attr.Map(ev, false) {
		ticket, key := r.prefetchDiag(ev)
		if r.hold.push(ev, r.now(), r.c.NamesWait, ticket, key) {
			return
		}
		r.share.unref(r.diag, ticket)
		r.attr.Map(ev, true)
	}
	r.process(ev, diagKey{})
}

// process runs an attributed event through the filters and the rate limit;
// what passes waits for its diagnosis or is written at once. key is its
// diagnosis key if already worked out.
func (r *traceRun) process(ev *decode.Event, key diagKey) {
	keep, unresolved := r.c.keep(ev)
	if !keep {
		fate := fateFiltered
		if unresolved {
			fate = fateUnresolved
		}
		r.limits.event(ev, fate, nil)
		if unresolved {
			r.filteredUnresolved++
			if r.filteredUnresolved == 1 {
				r.log.Warn("dropped an event that a filter could not decide: its cgroup or pod is not known (counted as filtered_unresolved)",
					"pid", ev.PID, "cgroup_id", ev.CgroupID, "why", firstOf(ev.PodUnresolved, ev.PodNamesUnresolved, ev.CgroupUnresolved))
			}
		} else {
			r.filtered++
		}
		return
	}
	var series prometheus.Counter
	if r.met != nil {
		series = r.met.count(ev) // and the kernel's suppressed of its key, by r.limits
	}
	ev.Suppressed = r.limits.event(ev, fateWritten, series)
	if r.diag == nil {
		r.emit(ev, nil)
		return
	}
	r.askDiagnosis(ev, key)
}

// write explains and writes one event, and tells the consumers.
func (r *traceRun) write(ev *decode.Event, g *diagnose.Diagnosis) {
	explained := r.explainer != nil && !ev.NodePort
	var rule explain.RetryRule
	if explained {
		r.explainEvent(ev)
		rule = r.x.RetryRule
	}
	expected := explained && r.x.Expected != ""
	if expected && g != nil && len(g.Fix) > 0 {
		// A failure programs cause on purpose (glibc's nscd probe) needs
		// no fix; the diagnosis is shared, so it is copied, not changed,
		// into the run's own scratch (no allocation per event; emit is
		// done with it before the next event).
		r.quietDiag = *g
		r.quietDiag.Fix = nil
		g = &r.quietDiag
	}
	if !ev.NodePort {
		rule.WindowNs = max(rule.WindowNs, uint64(r.c.RetryWindow)) // the client's own window, if longer
		ev.Attempt = r.attempts.Mark(ev, rule)
	}
	buf := r.sk.Buf()
	start := len(buf)
	buf = r.render(buf, ev, explained, g)
	r.sk.Add(buf, 1)
	r.written++
	if len(r.consumers) == 0 {
		return
	}
	e := &r.emitted
	*e = emitted{ev: ev, g: g, line: buf[start:], expected: expected}
	if explained {
		e.x = &r.x
	}
	for _, c := range r.consumers {
		c.consume(e)
	}
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// render appends ev's record: one JSON line, or the lines of its human
// form.
func (r *traceRun) render(buf []byte, ev *decode.Event, explained bool, g *diagnose.Diagnosis) []byte {
	var x *explain.Explanation
	if explained {
		x = &r.x
	}
	switch r.c.Output {
	case output.Table:
		return r.c.Human.AppendRow(buf, ev, x, g)
	case output.Text:
		return append(r.c.Human.AppendText(buf, ev, x, g), '\n')
	}
	return append(r.events.Append(buf, ev, r.c.Node, x, g), '\n')
}

func (r *traceRun) close() {
	if r.diag != nil {
		select {
		case <-r.diag.done:
		default:
			r.diag.close() // the loop ended with an error before draining
		}
	}
	r.sk.Close(2 * time.Second)
	if r.bins != nil {
		r.bins.w.close()
	}
	r.names.Close()
	if r.sockIter != nil {
		r.sockIter.Close()
	}
	if r.cgroups != nil {
		r.cgroups.Close()
	}
}

// finish writes what is queued, logs the totals and returns them.
func (r *traceRun) finish() (Stats, error) {
	r.sk.Close(2 * time.Second)
	r.limits.final = true
	if err := r.limits.read(r.t, time.Now()); err != nil { // the detached programs' last counts
		r.log.Warn("reading the kernel's rate limit counts at stop", "err", err)
	}
	s := r.stats()
	r.log.Info("stopped", r.stoppedAttrs(s)...)
	if err := r.sk.Err(); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			r.log.Info("stdout was closed by its reader: stopped")
			return s, nil
		}
		return s, fmt.Errorf("writing events: %w", err)
	}
	return s, nil
}
