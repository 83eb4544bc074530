package pipeline

import (
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/tracer"
)

// A failure's way through the trace, one stage after the other; each hands
// the event on to the next and keeps nothing of it unless it waits:
//
//  1. read and decode (loop, handle): a record from the source, decoded
//     once into the run's Event;
//  2. attribution (handle, names.go): its pod from the attributor, once;
//     an event whose names were asked of the runtime waits in the hold
//     queue, a copy of its own, bounded in time (Config.NamesWait) and
//     count (holdMax, past it counted as not awaited);
//  3. filters and the rate limit (process);
//  4. diagnosis (askDiagnosis, releaseDiag): a snapshot of its netns,
//     shared by the events of one key; an event waits for it in the
//     diagnosis wait, bounded in time (Config.DiagnoseWait) and by the
//     worker's queue (past it counted as skipped);
//  5. explanation and rendering (emit): the line goes into the sink's batch;
//  6. the consumers, told of each line written (consumers.go): Kubernetes
//     Events, the summary, the metrics and the demo's hook.
//
// The interfaces below are what the stages need of the world; the trace
// gives them the tracer, the decoder and the pod mapper, the tests their
// own.

// source is where the records come from: the tracer's ring.
type source interface {
	limitSource
	Read(*tracer.RawEvent) error
	SetDeadline(time.Time)
	Pending() int
	Stats() (tracer.Stats, error)
}

// decoder turns a record into an Event: decode.Decoder.
type decoder interface {
	Decode(raw *tracer.RawEvent, ev *decode.Event)
}

// attributor says whose an event is: pod.PodMapper, with the runtime's
// answer count (kube.Resolver.Answered) to know when to look again.
type attributor interface {
	// Map sets the event's pod; true when its names were asked of the
	// runtime and may come soon (never when final).
	Map(ev *decode.Event, final bool) (pending bool)
	// Answered counts the runtime's answers: held events are looked at
	// again only when it moved.
	Answered() uint64
}

// emitted is one written event, as the consumers are told of it. Valid
// only during the call: every field is reused for the next event.
type emitted struct {
	ev       *decode.Event
	x        *explain.Explanation // nil: not explained
	g        *diagnose.Diagnosis  // nil: no diagnosis
	line     []byte               // the line as written, with its newline
	expected bool                 // a failure its program causes on purpose (no Kubernetes Event)
}

// A consumer is told of every event written, in order, after its line went
// into the sink's batch. It must not wait: it runs on the reader's path.
type consumer interface {
	consume(e *emitted)
}
