package pipeline

import (
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/output"
)

// summary counts what the JSON stream carried between summary records.
type summary struct {
	enabled  bool
	every    time.Duration
	start    time.Time
	events   uint64
	nodeport uint64
	errnos   [256]uint64
	seen     totals // at the last record
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

// totals are the counters since the start that a summary record also
// gives for its interval.
type totals struct{ lost, dropped, suppressed, skipped uint64 }

// append writes the record and starts the next interval. A total read
// lower than at the last record (a failed read of the kernel's counters)
// gives 0 for the interval, never a wrapped count.
func (s *summary) append(b []byte, now time.Time, node string, t totals) []byte {
	since := func(total, seen uint64) uint64 { return total - min(seen, total) }
	b = output.AppendSummary(b, &output.Summary{Time: now, Since: s.start, Node: node, Events: s.events, Errnos: &s.errnos,
		NodePort: s.nodeport, Lost: since(t.lost, s.seen.lost), LostTotal: t.lost,
		Dropped: since(t.dropped, s.seen.dropped), DroppedTotal: t.dropped,
		Suppressed: since(t.suppressed, s.seen.suppressed), SuppressedTotal: t.suppressed,
		RunsSkipped: since(t.skipped, s.seen.skipped), RunsSkippedTotal: t.skipped})
	*s = summary{enabled: s.enabled, every: s.every, start: now, seen: t}
	return b
}
