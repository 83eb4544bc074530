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

const (
	// DefaultNamesWait is the longest an event waits for the runtime to
	// name its pod and container (Config.NamesWait, --names-wait); then it
	// goes out with the pod UID and container ID only, and says why.
	DefaultNamesWait = 400 * time.Millisecond
	// holdPoll is how often held events are looked at while any wait.
	holdPoll = 5 * time.Millisecond
	// holdMax bounds the events waiting (384 bytes each); past it an event
	// goes out at once without names.
	holdMax = 4096
)

// holdQueue keeps events, in arrival order, whose names were asked of the
// runtime: they are attributed again when the answer is there or their time
// is up.
type holdQueue struct {
	q        []*heldEvent
	free     []*heldEvent
	max      int
	overflow uint64 // events that found the queue full and went out without waiting
	answered uint64 // the runtime's answer count at the last full look
	held     uint64 // events that waited
	// waitMax is the longest an event waited, from when it was read to
	// when it went on: the wait itself (at most Config.NamesWait) and how
	// late the reader came back to it (a busy node).
	waitMax time.Duration
}

type heldEvent struct {
	ev     decode.Event // its own copy (CopyTo)
	at     time.Time    // read
	until  time.Time
	ticket uint64  // the diagnosis asked for it meanwhile (0: none), see prefetchDiag
	key    diagKey // its diagnosis key, when prefetchDiag worked it out
}

// diagKey is an event's diagnosis key (diagnose.KeyOf), worked out once.
type diagKey struct {
	k         diagnose.Key
	ok, known bool
}

func newHoldQueue(max int) holdQueue { return holdQueue{max: max} }

// push keeps a copy of ev, read at now, until now+wait; false when the
// queue is full. A slot is reused once it is given back (release).
func (h *holdQueue) push(ev *decode.Event, now time.Time, wait time.Duration, ticket uint64, key diagKey) bool {
	if len(h.q) >= h.max {
		h.overflow++
		return false
	}
	var e *heldEvent
	if n := len(h.free); n > 0 {
		e, h.free = h.free[n-1], h.free[:n-1]
	} else {
		e = new(heldEvent)
	}
	ev.CopyTo(&e.ev)
	e.at, e.until, e.ticket, e.key = now, now.Add(wait), ticket, key
	h.q = append(h.q, e)
	h.held++
	return true
}

// waited notes how long an event that goes on at now waited.
func (h *holdQueue) waited(e *heldEvent, now time.Time) {
	h.waitMax = max(h.waitMax, now.Sub(e.at))
}

// loop reads until the tracer is stopped and drained.
func (r *traceRun) loop() error {
	wait := r.c.Flush
	if wait == 0 && (r.met != nil || r.sum.enabled || r.limits.on) {
		wait = time.Second
	}
	r.lastTick = r.now()
	for {
		if d := r.readWait(wait); d > 0 {
			r.t.SetDeadline(time.Now().Add(d))
		} else {
			r.t.SetDeadline(time.Time{}) // a poll deadline may be left from held events
		}
		err := r.t.Read(&r.raw)
		if errors.Is(err, tracer.ErrClosed) {
			r.release(true)
			r.drainDiag()
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
		if r.t.Pending() == 0 || err != nil { // drained: hand the batch on
			r.sk.flush()
		}
		if now := r.now(); wait > 0 && now.Sub(r.lastTick) >= wait { // a busy ring never times out
			r.lastTick = now
			r.tick(now)
		}
	}
}

// readWait is how long a Read may block: the flush interval, shorter while
// events wait for names. 0: no deadline.
func (r *traceRun) readWait(wait time.Duration) time.Duration {
	if len(r.hold.q) == 0 && len(r.diagHold) == 0 {
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
	if r.mapPod(ev, false) {
		ticket, key := r.prefetchDiag(ev)
		if r.hold.push(ev, r.now(), r.c.NamesWait, ticket, key) {
			return
		}
		r.share.unref(r.diag, ticket)
		r.mapPod(ev, true)
	}
	r.process(ev, diagKey{})
}

// release sends on the held events whose names arrived or whose time is up
// (all of them when final). The queue is in arrival order, so deadlines are
// too: without a new answer from the runtime only the expired head is looked
// at; after one, every held event is.
func (r *traceRun) release(final bool) {
	if len(r.hold.q) == 0 {
		return
	}
	now := r.now()
	answered := r.answered()
	all := final || answered != r.hold.answered
	r.hold.answered = answered
	kept := r.hold.q[:0]
	for i, h := range r.hold.q {
		expired := final || !now.Before(h.until)
		if !all && !expired {
			kept = append(kept, r.hold.q[i:]...)
			break
		}
		if r.mapPod(&h.ev, expired) {
			kept = append(kept, h)
			continue
		}
		r.hold.waited(h, now)
		r.process(&h.ev, h.key)
		r.share.unref(r.diag, h.ticket) // its own ask holds the ticket now, if it asked
		r.hold.free = append(r.hold.free, h)
	}
	clear(r.hold.q[len(kept):])
	r.hold.q = kept
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

// prefetchDiag asks for the diagnosis of an event that waits for its names,
// so that the snapshot is taken meanwhile and the two waits overlap. Only
// when the event will be written: no filter waits for the names, and the
// others keep it (a snapshot nobody uses would break the accounting). The
// ticket holds a reference until the event is processed (share.unref); the
// key, once worked out, goes with the event.
func (r *traceRun) prefetchDiag(ev *decode.Event) (uint64, diagKey) {
	c := &r.c
	if r.diag == nil || c.Namespace != "" || c.Pod != "" || c.Container != "" || c.Selector != nil {
		return 0, diagKey{}
	}
	if keep, _ := c.keep(ev); !keep {
		return 0, diagKey{}
	}
	k, ok := r.diag.d.KeyOf(ev) // reads only the Diagnoser's settings
	key := diagKey{k: k, ok: ok, known: true}
	if !ok {
		return 0, key
	}
	return r.share.prefetch(r.diag, ev, k, r.now().Add(r.c.NamesWait)), key
}

// askDiagnosis writes ev with the snapshot its key already has in this
// interval, or holds a copy of it for the snapshot asked (once per key) of
// the worker.
func (r *traceRun) askDiagnosis(ev *decode.Event, key diagKey) {
	if !key.known {
		key.k, key.ok = r.diag.d.KeyOf(ev)
	}
	if !key.ok {
		r.emit(ev, nil) // nothing to diagnose
		return
	}
	k := key.k
	now := r.now()
	if g, ok := r.share.fresh(k, now); ok {
		r.emit(ev, g)
		return
	}
	ticket, ok := r.share.inflight[k]
	if !ok {
		if ticket, ok = r.diag.submit(ev); !ok {
			r.emit(ev, diagFull)
			return
		}
		r.share.inflight[k] = ticket
		r.share.waiting[ticket] = &ticketState{key: k}
	}
	r.share.waiting[ticket].refs++
	r.diagHold = append(r.diagHold, diagHeld{ev: r.held.copyOf(ev), ticket: ticket, at: now, until: now.Add(r.c.DiagnoseWait)})
}

// releaseDiag writes the events whose diagnosis is there or whose wait is
// over (all when final), in order: the worker answers in order.
func (r *traceRun) releaseDiag(final bool) {
	now := r.now()
	n := 0
	for ; n < len(r.diagHold); n++ {
		h := &r.diagHold[n]
		g, ok := r.diag.peek(h.ticket)
		switch {
		case ok:
			g = r.share.answered(r.diag, h.ticket, g, now)
		case !final && now.Before(h.until):
		default:
			r.share.gaveUp(r.diag, h.ticket)
			g, ok = r.diagLate, true
		}
		if !ok {
			break
		}
		r.share.waitMax = max(r.share.waitMax, now.Sub(h.at))
		if h.ev.PodNamesUnresolved != "" {
			r.mapPod(h.ev, true) // the names may have come meanwhile
		}
		r.emit(h.ev, g)
		r.held.put(h.ev)
		h.ev = nil
	}
	r.diagHold = append(r.diagHold[:0], r.diagHold[n:]...)
}

// drainDiag waits, within the diagnosis wait, for the diagnoses still being taken at
// stop, then writes every held event.
func (r *traceRun) drainDiag() {
	if r.diag == nil {
		return
	}
	for deadline := time.Now().Add(r.c.DiagnoseWait); len(r.diagHold) > 0 && time.Now().Before(deadline); time.Sleep(holdPoll) {
		r.releaseDiag(false)
	}
	r.releaseDiag(true)
	r.diag.close()
}

// emit explains and writes one event.
func (r *traceRun) emit(ev *decode.Event, g *diagnose.Diagnosis) {
	explained := r.explainer != nil && !ev.NodePort
	var rule explain.RetryRule
	if explained {
		r.explainer.Explain(ev, &r.x, r.c.Explain == 2)
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
	buf := r.sk.buf()
	start := len(buf)
	buf = r.render(buf, ev, explained, g)
	if r.hooks.Event != nil {
		r.hooks.Event(ev, &r.x, buf[start:])
	}
	r.sk.add(buf, 1)
	r.written++
	if !expected {
		r.kubeEvent(ev, g)
	}
	r.sum.count(ev)
	if r.met != nil {
		r.met.ports(ev, g)
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

// render appends one line for ev.
func (r *traceRun) render(buf []byte, ev *decode.Event, explained bool, g *diagnose.Diagnosis) []byte {
	switch {
	case r.c.Table:
		buf = output.AppendTable(buf, ev)
		if explained {
			buf = append(buf, '\n')
			buf = output.AppendTableExplained(buf, &r.x)
		}
		if g != nil {
			buf = append(buf, "\n    ⚑ "...)
			buf = append(buf, g.Verdict...)
		}
	case explained:
		buf = r.events.Append(buf, ev, r.c.Node, &r.x, g)
	default:
		buf = r.events.Append(buf, ev, r.c.Node, nil, g)
	}
	return append(buf, '\n')
}

// tick runs at least every flush interval (or second): counters for
// metrics, and the summary record when it is due.
func (r *traceRun) tick(now time.Time) {
	// The kernel's held back counts are read whatever is enabled: the
	// events' "suppressed" (table output too) come from this read.
	if err := r.limits.read(r.t, now); err != nil && !r.limitErr {
		r.limitErr = true
		r.log.Warn("reading the kernel's rate limit counts; suppressed counts lag until it works", "err", err)
	}
	if r.met == nil && !r.sum.enabled {
		return
	}
	st, _ := r.t.Stats()
	if r.met != nil {
		r.updateMetrics(st)
	}
	if r.sum.enabled && now.Sub(r.sum.start) >= r.sum.every {
		b := r.sum.append(r.sk.buf(), now, r.c.Node, st.KernelLost, r.sk.dropped.Load(), r.limits.held())
		r.sk.add(append(b, '\n'), 0)
		r.sk.flush()
	}
}

func (r *traceRun) updateMetrics(st tracer.Stats) {
	m := r.met
	m.lost.Store(st.KernelLost)
	m.events.Store(st.Events + r.limits.total)
	m.dropped.Store(r.sk.dropped.Load())
	m.suppressed.Store(r.limits.held())
	m.limitEvicted.Store(r.limits.evicted())
	m.filteredUnresolved.Store(r.filteredUnresolved + r.limits.unresolved)
	m.criFailures.Store(r.names.Failures.Load())
	m.binariesGivenUp.Store(r.binariesGivenUp())
	_, why := r.names.Healthy()
	m.criDown.Store(&why)
	m.caches.Store(r.cacheSizes(st))
}

// cacheSizes samples every bounded cache of the trace.
func (r *traceRun) cacheSizes(st tracer.Stats) *Caches {
	var c Caches
	if r.cgroups != nil {
		c.CgroupPaths = Size{r.cgroups.Len(), r.cgroups.Cap()}
	}
	byCg, byNS, byPID, bound, pidBound := r.pods.CacheSizes()
	c.PodsByCgroup, c.PodsByNetNS, c.PodsByPID = Size{byCg, bound}, Size{byNS, bound}, Size{byPID, pidBound}
	if r.explainer != nil {
		n, b := r.explainer.Detector.CacheSizes()
		c.Binaries = Size{n, b}
	}
	if w := r.diag; w != nil {
		b := int(w.cacheBound.Load())
		c.Diagnoses, c.NetNSHandles = Size{int(w.cacheSnaps.Load()), b}, Size{int(w.cacheHandles.Load()), b}
	}
	c.RateLimitKeys = Size{r.limits.entries, r.limits.max}
	c.CRIIDs = Size{r.names.Len(), r.names.MaxEntries}
	c.Processes = Size{st.Procs, st.ProcsMax}
	return &c
}

// Stats are a trace's totals, as the "stopped" line logs them. Every event
// the kernel reported (read from the ring, or held back by the rate limit
// in the kernel) is written, filtered (decided or not) or suppressed; every
// event written is delivered whole or dropped.
type Stats struct {
	Events, Lost, Malformed      uint64 // reported by the kernel; dropped by the kernel; not an event
	Written, Delivered, Dropped  uint64
	Filtered, FilteredUnresolved uint64
	Suppressed                   uint64
	// Of Suppressed, those whose key no event named (its events lost, or
	// the key evicted before it was read): counted, in no pod's series.
	SuppressedUnattributed uint64
	LimitKeysEvicted       uint64 // rate limit keys the kernel's LRU dropped for room
	NamesNotAwaited        uint64 // went out without waiting for the runtime (hold queue full)
	// NamesHeld events waited for the runtime's names, the longest
	// NamesWaitMax: from when the event was read to when it went on, by
	// eaddr's clock, so also how late the reader came back to it.
	NamesHeld    uint64
	NamesWaitMax time.Duration
	// The diagnosis: snapshots taken, events that shared one, netns gone,
	// events written before their snapshot or without asking for one.
	Snapshots, Shared, Unreachable, DiagnosesLate, DiagnosesSkipped uint64
	// DiagnosisWaitMax: the longest an event waited for its snapshot, from
	// its ask to its line.
	DiagnosisWaitMax time.Duration
	// BinariesGivenUp: binaries of failing programs not analysed because
	// they were past the bounds on one binary (explain.Detector).
	BinariesGivenUp uint64
}

// binariesGivenUp is the explain stage's count of binaries it did not
// analyse (0 without it).
func (r *traceRun) binariesGivenUp() uint64 {
	if r.explainer == nil {
		return 0
	}
	return r.explainer.Detector.BinariesGivenUp()
}

func (r *traceRun) stats() Stats {
	st, err := r.t.Stats()
	if err != nil {
		r.log.Warn("reading counters", "err", err)
	}
	b := r.limits
	s := Stats{Events: st.Events + b.total, Lost: st.KernelLost, Malformed: st.Malformed, Written: r.written,
		Delivered: r.sk.delivered.Load(), Dropped: r.sk.dropped.Load(), Filtered: r.filtered + b.filtered,
		FilteredUnresolved: r.filteredUnresolved + b.unresolved, Suppressed: b.held(), NamesNotAwaited: r.hold.overflow,
		NamesHeld: r.hold.held, NamesWaitMax: r.hold.waitMax,
		SuppressedUnattributed: b.unattributed(), LimitKeysEvicted: b.evicted(), BinariesGivenUp: r.binariesGivenUp()}
	if w := r.diag; w != nil {
		s.Snapshots, s.Shared, s.Unreachable = uint64(w.snapshots.Load()), uint64(w.shared.Load())+r.share.shared, uint64(w.unreachable.Load())
		s.DiagnosesLate, s.DiagnosesSkipped, s.DiagnosisWaitMax = r.share.late, w.full, r.share.waitMax
	}
	return s
}

// finish writes what is queued, logs the totals and returns them.
func (r *traceRun) finish() (Stats, error) {
	r.sk.close(2 * time.Second)
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

// stoppedAttrs are the totals of the stopped line: the rare ones only when
// they happened.
func (r *traceRun) stoppedAttrs(s Stats) []any {
	attrs := []any{"events", s.Events, "written", s.Written, "delivered", s.Delivered, "filtered", s.Filtered,
		"filtered_unresolved", s.FilteredUnresolved, "lost", s.Lost,
		"dropped", s.Dropped, "suppressed", s.Suppressed, "malformed", s.Malformed}
	if s.NamesHeld > 0 || s.NamesNotAwaited > 0 {
		attrs = append(attrs, "names_held", s.NamesHeld, "names_wait_max_ms", s.NamesWaitMax.Milliseconds(), "names_not_awaited", s.NamesNotAwaited)
	}
	if s.SuppressedUnattributed > 0 || s.LimitKeysEvicted > 0 {
		attrs = append(attrs, "suppressed_unattributed", s.SuppressedUnattributed, "limit_keys_evicted", s.LimitKeysEvicted)
	}
	if k := r.c.KubeEvents; k != nil {
		ks := k.Stats()
		attrs = append(attrs, "kube_events_created", ks.Created, "kube_events_updated", ks.Updated,
			"kube_event_calls_failed", ks.Errors, "kube_events_dropped", ks.Dropped)
	}
	if r.diag != nil {
		attrs = append(attrs, "netns_snapshots", s.Snapshots, "snapshots_shared", s.Shared,
			"netns_unreachable", s.Unreachable, "diagnoses_late", s.DiagnosesLate, "diagnoses_skipped", s.DiagnosesSkipped,
			"diagnosis_wait_max_ms", s.DiagnosisWaitMax.Milliseconds())
	}
	if s.BinariesGivenUp > 0 {
		attrs = append(attrs, "binaries_given_up", s.BinariesGivenUp)
	}
	return attrs
}

func (r *traceRun) close() {
	if r.diag != nil {
		select {
		case <-r.diag.done:
		default:
			r.diag.close() // the loop ended with an error before draining
		}
	}
	r.sk.close(2 * time.Second)
	r.names.Close()
	if r.sockIter != nil {
		r.sockIter.Close()
	}
	if r.cgroups != nil {
		r.cgroups.Close()
	}
}
