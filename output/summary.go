package output

import (
	"strconv"
	"time"

	"github.com/eaddr/eaddr/decode"
)

// Summary is what a {"kind":"summary"} record says of one interval.
type Summary struct {
	Time, Since     time.Time
	Node            string
	Events          uint64
	Errnos          *[256]uint64 // events per errno
	NodePort        uint64
	Lost, LostTotal uint64 // in the interval, and since the start
	Dropped         uint64
	DroppedTotal    uint64
	Suppressed      uint64
	SuppressedTotal uint64
	// Runs of eaddr's programs the kernel skipped (tracer.Stats.RunsSkipped):
	// written only once there was one.
	RunsSkipped, RunsSkippedTotal uint64
}

// AppendSummary appends the summary record (docs/events.md).
func AppendSummary(b []byte, s *Summary) []byte {
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, decode.Schema, 10)
	b = append(b, `,"kind":"summary","time":"`...)
	b = s.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","since":"`...)
	b = s.Since.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if s.Node != "" {
		b = append(b, `,"node":`...)
		b = AppendString(b, s.Node)
	}
	b = append(b, `,"events":`...)
	b = strconv.AppendUint(b, s.Events, 10)
	b = append(b, `,"errnos":{`...)
	first := true
	for n, c := range s.Errnos {
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
	if s.NodePort > 0 {
		b = append(b, `,"nodeport_collisions":`...)
		b = strconv.AppendUint(b, s.NodePort, 10)
	}
	for _, f := range []struct {
		name string
		n    uint64
	}{{"lost", s.Lost}, {"lost_total", s.LostTotal}, {"dropped", s.Dropped}, {"dropped_total", s.DroppedTotal},
		{"suppressed", s.Suppressed}, {"suppressed_total", s.SuppressedTotal}} {
		b = append(b, ',', '"')
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, f.n, 10)
	}
	if s.RunsSkippedTotal > 0 {
		b = append(b, `,"runs_skipped":`...)
		b = strconv.AppendUint(b, s.RunsSkipped, 10)
		b = append(b, `,"runs_skipped_total":`...)
		b = strconv.AppendUint(b, s.RunsSkippedTotal, 10)
	}
	return append(b, '}')
}
