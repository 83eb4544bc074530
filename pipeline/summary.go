package pipeline

import (
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/output"
)

// summary counts what the JSON stream carried between summary records.
type summary struct {
	enabled     bool
	every       time.Duration
	start       time.Time
	events      uint64
	nodeport    uint64
	supprSeen   uint64 // held back by the rate limit, at the last record
	errnos      [256]uint64
	lostSeen    uint64 // kernel drops at the last record
	droppedSeen uint64 // output drops at the last record
}

func (s *summary) count(ev *decode.Event) {
	if !s.enabled {
		return
	}
	s.events++
	switch {
	case ev.NodePort:
		s.nodeport++
	case ev.Errno > 0 && ev.Errno < len(s.errnos):
		s.errnos[ev.Errno]++
	}
}

// append writes the record and starts the next interval.
func (s *summary) append(b []byte, now time.Time, node string, lostTotal, droppedTotal, suppressedTotal uint64) []byte {
	b = output.AppendSummary(b, &output.Summary{Time: now, Since: s.start, Node: node, Events: s.events, Errnos: &s.errnos,
		NodePort: s.nodeport, Lost: lostTotal - s.lostSeen, LostTotal: lostTotal, Dropped: droppedTotal - s.droppedSeen,
		DroppedTotal: droppedTotal, Suppressed: suppressedTotal - min(s.supprSeen, suppressedTotal), SuppressedTotal: suppressedTotal})
	*s = summary{enabled: s.enabled, every: s.every, start: now, lostSeen: lostTotal, droppedSeen: droppedTotal, supprSeen: suppressedTotal}
	return b
}
