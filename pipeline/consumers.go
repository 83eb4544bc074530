package pipeline

import (
	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
)

// The consumers of written events, besides the line itself: the sink's
// batch is where emit renders the line, so that it is written without a
// copy; everything else that wants to know of an event is a consumer,
// told in the order of newConsumers. Kubernetes Events are kubeEvents
// (kubeevents.go).

// newConsumers are the consumers the configuration asks for.
func newConsumers(c *Config, sum *summary, met *metrics, hooks Hooks) []consumer {
	var cs []consumer
	if c.KubeEvents != nil {
		cs = append(cs, kubeEvents{c.KubeEvents})
	}
	if sum.enabled {
		cs = append(cs, sum)
	}
	if met != nil {
		cs = append(cs, met)
	}
	if hooks.Event != nil {
		cs = append(cs, eventHook(hooks.Event))
	}
	return cs
}

// consume counts the event for the next summary record.
func (s *summary) consume(e *emitted) { s.count(e.ev) }

// consume sets the port gauges of the event's netns and pod.
func (m *metrics) consume(e *emitted) { m.port.diagnosed(e.ev, e.g) }

// eventHook is Hooks.Event as a consumer.
type eventHook func(ev *decode.Event, x *explain.Explanation, line []byte)

// notExplained is what the hook is given for an event not explained.
var notExplained explain.Explanation

func (h eventHook) consume(e *emitted) {
	x := e.x
	if x == nil {
		x = &notExplained
	}
	h(e.ev, x, e.line)
}
