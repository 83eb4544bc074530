package pipeline

import (
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// The diagnosis stage on the reader side: an event waits, bounded, for the
// snapshot of its netns (the worker takes it, diagworker.go), shared with
// the other events of its key (diagShare).

// diagKey is an event's diagnosis key (diagnose.KeyOf), worked out once.
type diagKey struct {
	k         diagnose.Key
	ok, known bool
}

// prefetchDiag asks for the diagnosis of an event that waits for its names,
// so that the snapshot is taken meanwhile and the two waits overlap. Only
// when the event will be written: no filter waits for the names, and the
// others keep it (a snapshot nobody uses would break the accounting). The
// ticket holds a reference until the event is processed (share.unref); the
// key, once worked out, goes with the event.
func (r *traceRun) prefetchDiag(ev *decode.Event) (uint64, diagKey) {
	if r.diag == nil || !r.c.keepsBeforeNames(ev) {
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
			r.attr.Map(h.ev, true) // the names may have come meanwhile
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
