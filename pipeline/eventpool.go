package pipeline

import "github.com/eaddr/eaddr/decode"

// eventPool lends Events to the queues that keep one past the reader's next
// Decode (the names wait, the diagnosis wait, the diagnosis worker) and
// takes them back, so that a queue holds a decoded Event, not the raw record
// decoded again. An Event is copied into a lent one with CopyTo (its slices
// point into its own buffers). It allocates only while more are lent than
// were ever given back; safe for use by two goroutines (the reader lends,
// the worker gives back).
type eventPool struct{ free chan *decode.Event }

func newEventPool(n int) *eventPool { return &eventPool{free: make(chan *decode.Event, n)} }

// copyOf lends an Event holding a copy of ev.
func (p *eventPool) copyOf(ev *decode.Event) *decode.Event {
	var e *decode.Event
	select {
	case e = <-p.free:
	default:
		e = new(decode.Event)
	}
	ev.CopyTo(e)
	return e
}

// put takes e back; a full pool lets it go.
func (p *eventPool) put(e *decode.Event) {
	if e == nil {
		return
	}
	e.Pod = nil // not kept alive by a free Event
	select {
	case p.free <- e:
	default:
	}
}
