package top

import (
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// HistoryLen is how many samples of a netns the trend is fitted to: a
// minute at the default 2 s interval.
const HistoryLen = 30

// point is one sample of a netns: the ports taken toward each of its top
// destinations, and its failure count.
type point struct {
	at       time.Time
	ports    map[string]int // by destination; "" for the ports held for all when it has none
	failures uint64
	counted  bool // failures is a count (the tracer was counting)
}

// history is one netns's last points, oldest first.
type history struct {
	points []point
}

// pointOf is r's point at t; failures from counts when counted.
func pointOf(r *diagnose.NetNSReport, t time.Time, counts map[uint64]uint64) point {
	p := point{at: t, ports: map[string]int{}}
	for _, d := range r.Destinations {
		p.ports[d.Remote] = d.Ports
	}
	if len(r.Destinations) == 0 {
		p.ports[""] = r.HeldForAll
	}
	if counts != nil {
		p.failures, p.counted = counts[r.Inode], true
	}
	return p
}

func (h *history) add(p point) {
	if len(h.points) == HistoryLen {
		copy(h.points, h.points[1:])
		h.points = h.points[:HistoryLen-1]
	}
	h.points = append(h.points, p)
}

// series is the ports toward dst in the newest points that have dst among
// their top destinations, up to the first one (from the newest back) that
// does not: a destination that was not among the top ones has an unknown
// count there, so the series stops.
func (h *history) series(dst string) (ts []time.Time, ports []int) {
	i := len(h.points)
	for i > 0 {
		if _, ok := h.points[i-1].ports[dst]; !ok {
			break
		}
		i--
	}
	for _, p := range h.points[i:] {
		ts = append(ts, p.at)
		ports = append(ports, p.ports[dst])
	}
	return ts, ports
}
