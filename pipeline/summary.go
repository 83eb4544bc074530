package pipeline

import (
	"strconv"
	"time"

	"github.com/eaddr/eaddr/decode"
)

// summary counts what the JSON stream carried between summary records.
type summary struct {
	enabled     bool
	every       time.Duration
	start       time.Time
	events      uint64
	nodeport    uint64
	suppr       uint64 // held back by the rate limit in this interval
	errnos      [256]uint64
	lostSeen    uint64 // kernel drops at the last record
	droppedSeen uint64 // output drops at the last record
}

func (s *summary) suppress() { s.suppr++ }

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
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, decode.Schema, 10)
	b = append(b, `,"kind":"summary","time":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","since":"`...)
	b = s.start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if node != "" {
		b = append(b, `,"node":`...)
		b = decode.AppendString(b, node)
	}
	b = append(b, `,"events":`...)
	b = strconv.AppendUint(b, s.events, 10)
	b = append(b, `,"errnos":{`...)
	first := true
	for n, c := range s.errnos {
		if c == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = decode.AppendErrnoName(b, n)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, c, 10)
	}
	b = append(b, '}')
	if s.nodeport > 0 {
		b = append(b, `,"nodeport_collisions":`...)
		b = strconv.AppendUint(b, s.nodeport, 10)
	}
	b = append(b, `,"lost":`...)
	b = strconv.AppendUint(b, lostTotal-s.lostSeen, 10)
	b = append(b, `,"lost_total":`...)
	b = strconv.AppendUint(b, lostTotal, 10)
	b = append(b, `,"dropped":`...)
	b = strconv.AppendUint(b, droppedTotal-s.droppedSeen, 10)
	b = append(b, `,"dropped_total":`...)
	b = strconv.AppendUint(b, droppedTotal, 10)
	b = append(b, `,"suppressed":`...)
	b = strconv.AppendUint(b, s.suppr, 10)
	b = append(b, `,"suppressed_total":`...)
	b = strconv.AppendUint(b, suppressedTotal, 10)
	b = append(b, '}')
	*s = summary{enabled: s.enabled, every: s.every, start: now, lostSeen: lostTotal, droppedSeen: droppedTotal}
	return b
}
