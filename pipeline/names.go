package pipeline

import (
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/pod/kube"
)

// The attribution stage: an event's pod, and the bounded wait for the
// runtime's names.

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

// release sends on the held events whose names arrived or whose time is up
// (all of them when final). The queue is in arrival order, so deadlines are
// too: without a new answer from the runtime only the expired head is looked
// at; after one, every held event is.
func (r *traceRun) release(final bool) {
	if len(r.hold.q) == 0 {
		return
	}
	now := r.now()
	answered := r.attr.Answered()
	all := final || answered != r.hold.answered
	r.hold.answered = answered
	kept := r.hold.q[:0]
	for i, h := range r.hold.q {
		expired := final || !now.Before(h.until)
		if !all && !expired {
			kept = append(kept, r.hold.q[i:]...)
			break
		}
		if r.attr.Map(&h.ev, expired) {
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

// podAttribution is the trace's attributor: the pod mapper, and the
// runtime's answer count.
type podAttribution struct {
	pods  *pod.PodMapper
	names *kube.Resolver
}

func (a podAttribution) Map(ev *decode.Event, final bool) bool { return a.pods.Map(ev, final) }
func (a podAttribution) Answered() uint64                      { return a.names.Answered.Load() }
