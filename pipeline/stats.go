package pipeline

// The trace's counters: what each tick publishes, and the totals of the
// stopped line.

import (
	"time"

	"github.com/eaddr/eaddr/tracer"
)

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
		b := r.sum.append(r.sk.Buf(), now, r.c.Node, totals{st.KernelLost, r.sk.Dropped(), r.limits.held(), st.RunsSkippedTotal()})
		r.sk.Add(append(b, '\n'), 0)
		r.sk.Flush()
	}
}

func (r *traceRun) updateMetrics(st tracer.Stats) {
	m := r.met
	m.lost.Store(st.KernelLost)
	m.asyncUnseen.Store(st.AsyncUnseen)
	for i, n := range st.RunsSkipped {
		m.skipped[i].Store(n)
	}
	m.events.Store(st.Events + r.limits.total)
	m.dropped.Store(r.sk.Dropped())
	m.suppressed.Store(r.limits.held())
	m.limitEvicted.Store(r.limits.evicted())
	m.filteredUnresolved.Store(r.filteredUnresolved + r.limits.unresolved)
	m.criFailures.Store(r.names.Failures.Load())
	m.binariesGivenUp.Store(r.binariesGivenUp())
	if b := r.bins; b != nil {
		b.collect()
		m.binariesSkipped.Store(b.skipped)
		m.binariesStuck.Store(int64(b.stuck(r.now())))
		m.binariesMismatched.Store(r.explainer.Detector.BinariesMismatched())
	}
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
		c.Diagnoses = Size{len(r.share.recent), recentMax}
		c.NetNSHandles = Size{int(w.cacheHandles.Load()), int(w.cacheBound.Load())}
	}
	c.RateLimitKeys = Size{r.limits.entries, r.limits.max}
	c.CRIIDs = Size{r.names.Len(), r.names.MaxEntries}
	c.Processes = Size{st.Procs, st.ProcsMax}
	if r.sk != nil {
		made, depth := r.sk.Batches()
		c.OutputBatches = Size{made, depth}
	}
	return &c
}

// Stats are a trace's totals, as the "stopped" line logs them. Every event
// the kernel reported (read from the ring, or held back by the rate limit
// in the kernel) is written, filtered (decided or not) or suppressed; every
// event written is delivered whole or dropped.
type Stats struct {
	Events, Lost, Malformed      uint64 // reported by the kernel; dropped by the kernel; not an event
	RunsSkipped                  uint64 // runs of eaddr's programs the kernel skipped (tracer.Stats)
	AsyncUnseen                  uint64 // pending connects whose end no program saw (tracer.Stats)
	Written, Delivered, Dropped  uint64
	Filtered, FilteredUnresolved uint64
	Suppressed                   uint64
	// Of Suppressed, those whose key no event named (its events lost, or
	// the key evicted before it was read): counted, in no pod's series.
	SuppressedUnattributed uint64
	// Of Suppressed, those their cgroup's bucket held back
	// (--rate-limit-cgroup), not their key's.
	SuppressedCgroup uint64
	LimitKeysEvicted uint64 // rate limit keys the kernel's LRU dropped for room
	NamesNotAwaited  uint64 // went out without waiting for the runtime (hold queue full)
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
	// The analysis of binaries beside the reader: events that waited for
	// their binary (the longest BinaryWaitMax), events written before it
	// was analysed, binaries whose analysis was not started (queue full,
	// file system stuck), analyses stuck in a read at the stop, binaries
	// whose path in their root held another file.
	BinariesHeld                                                     uint64
	BinaryWaitMax                                                    time.Duration
	BinariesLate, BinariesSkipped, BinariesStuck, BinariesMismatched uint64
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
	s := Stats{Events: st.Events + b.total, Lost: st.KernelLost, RunsSkipped: st.RunsSkippedTotal(), AsyncUnseen: st.AsyncUnseen, Malformed: st.Malformed, Written: r.written,
		Delivered: r.sk.Delivered(), Dropped: r.sk.Dropped(), Filtered: r.filtered + b.filtered,
		FilteredUnresolved: r.filteredUnresolved + b.unresolved, Suppressed: b.held(), NamesNotAwaited: r.hold.overflow,
		NamesHeld: r.hold.held, NamesWaitMax: r.hold.waitMax,
		SuppressedUnattributed: b.unattributed(), SuppressedCgroup: b.heldByCgroup(), LimitKeysEvicted: b.evicted(),
		BinariesGivenUp: r.binariesGivenUp()}
	if b := r.bins; b != nil {
		b.collect()
		s.BinariesHeld, s.BinaryWaitMax, s.BinariesLate, s.BinariesSkipped = b.heldN, b.waitMax, b.late, b.skipped
		s.BinariesStuck, s.BinariesMismatched = uint64(b.stuck(r.now())), r.explainer.Detector.BinariesMismatched()
	}
	if w := r.diag; w != nil {
		s.Snapshots, s.Shared, s.Unreachable = uint64(w.snapshots.Load()), r.share.shared, uint64(w.unreachable.Load())
		s.DiagnosesLate, s.DiagnosesSkipped, s.DiagnosisWaitMax = r.share.late, w.full, r.share.waitMax
	}
	return s
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
	if s.SuppressedCgroup > 0 {
		attrs = append(attrs, "suppressed_cgroup", s.SuppressedCgroup)
	}
	if k := r.c.KubeEvents; k != nil {
		ks := k.Stats()
		attrs = append(attrs, "kube_events_created", ks.Created, "kube_events_updated", ks.Updated,
			"kube_event_calls_failed", ks.Errors, "kube_events_dropped", ks.Dropped, "kube_events_unnamed", ks.Unnamed,
			"kube_port_warnings_dropped", ks.WarningsDropped, "kube_events_folded", ks.Folded)
	}
	if r.diag != nil {
		attrs = append(attrs, "netns_snapshots", s.Snapshots, "snapshots_shared", s.Shared,
			"netns_unreachable", s.Unreachable, "diagnoses_late", s.DiagnosesLate, "diagnoses_skipped", s.DiagnosesSkipped,
			"diagnosis_wait_max_ms", s.DiagnosisWaitMax.Milliseconds())
	}
	if s.BinariesGivenUp > 0 {
		attrs = append(attrs, "binaries_given_up", s.BinariesGivenUp)
	}
	if s.BinariesHeld > 0 || s.BinariesLate > 0 || s.BinariesSkipped > 0 || s.BinariesStuck > 0 {
		attrs = append(attrs, "binaries_held", s.BinariesHeld, "binary_wait_max_ms", s.BinaryWaitMax.Milliseconds(),
			"binaries_late", s.BinariesLate, "binaries_skipped", s.BinariesSkipped, "binaries_stuck", s.BinariesStuck)
	}
	if s.BinariesMismatched > 0 {
		attrs = append(attrs, "binaries_mismatched", s.BinariesMismatched)
	}
	if s.RunsSkipped > 0 {
		attrs = append(attrs, "runs_skipped", s.RunsSkipped)
	}
	if s.AsyncUnseen > 0 {
		attrs = append(attrs, "async_unseen", s.AsyncUnseen)
	}
	return attrs
}
