package top

import (
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/output"
)

// Model keeps the history of each netns across samples and makes rows.
type Model struct {
	hist map[uint64]*history
	last Sample
	prev map[uint64]point // each netns's point before the newest
	// Sort orders the rows; the zero value is SortETA.
	Sort SortKey
	// Warn is --warn: the node's budgets show from half of it (node.go);
	// 0: 80.
	Warn int
}

// NewModel returns an empty model sorted by time to exhaustion.
func NewModel() *Model {
	return &Model{hist: map[uint64]*history{}, prev: map[uint64]point{}}
}

// Add records a sample; netns that are gone from it are forgotten.
func (m *Model) Add(s Sample) {
	seen := map[uint64]bool{}
	for i := range s.NetNS {
		r := &s.NetNS[i]
		seen[r.Inode] = true
		if r.Error != "" {
			delete(m.hist, r.Inode)
			delete(m.prev, r.Inode)
			continue
		}
		h := m.hist[r.Inode]
		if h == nil {
			h = &history{}
			m.hist[r.Inode] = h
		}
		if n := len(h.points); n > 0 {
			m.prev[r.Inode] = h.points[n-1]
		} else {
			delete(m.prev, r.Inode)
		}
		h.add(pointOf(r, s.At, s.Failures))
	}
	for inode := range m.hist {
		if !seen[inode] {
			delete(m.hist, inode)
			delete(m.prev, inode)
		}
	}
	m.last = s
}

// Last is the newest sample.
func (m *Model) Last() Sample { return m.last }

// Rows are the newest sample's netns, sorted by m.Sort.
func (m *Model) Rows() []Row {
	rows := make([]Row, 0, len(m.last.NetNS))
	for i := range m.last.NetNS {
		rows = append(rows, m.row(&m.last.NetNS[i]))
	}
	SortRows(rows, m.Sort)
	return rows
}

// row is r with its trend, time to exhaustion and failure rate.
func (m *Model) row(r *diagnose.NetNSReport) Row {
	row := Row{Inode: r.Inode, PID: r.PID, Comm: r.Comm, Mount: r.Mount, Host: r.Host, Pod: r.Pod, Error: r.Error,
		Usable: r.Usable, InUse: r.InUse, HeldForAll: r.HeldForAll, Used: r.HeldForAll, Left: r.Usable - r.HeldForAll}
	row.Name = output.NetNSName(r)
	if r.Error != "" {
		row.Trend = Trend{Why: "not audited"}
		row.ETA = ETA{Why: "not audited"}
		row.Failures = m.failures(r.Inode)
		return row
	}
	if len(r.Destinations) > 0 {
		d := r.Destinations[0]
		row.Destination, row.Used, row.Percent, row.Exhausted, row.Culprit = d.Remote, d.Ports, d.Percent, d.Exhausted, d.Culprit
		row.Left = max(d.Tried-d.Ports-d.Unsure, 0)
	} else if r.Usable > 0 {
		row.Percent = r.HeldForAll * 100 / r.Usable
	}
	h := m.hist[r.Inode]
	row.Trend = fitTrend(h.series(row.Destination))
	row.ETA = eta(row.Left, row.Exhausted, row.Trend)
	row.Failures = m.failures(r.Inode)
	return row
}

// failures is inode's failure rate over the last interval (since the
// tracer began counting for its first sample).
func (m *Model) failures(inode uint64) Rate {
	s := m.last
	if s.Failures == nil {
		return Rate{Why: s.FailuresWhy}
	}
	now := s.Failures[inode]
	from, since := uint64(0), s.FailuresSince
	if p, ok := m.prev[inode]; ok && p.counted && m.hist[inode] != nil {
		from, since = p.failures, p.at
	}
	dt := s.At.Sub(since)
	if dt <= 0 || now < from {
		return Rate{Why: "no interval to count over"}
	}
	return Rate{PerSec: float64(now-from) / dt.Seconds(), Count: now - from, OK: true}
}

// Rate is failures per second over an interval.
type Rate struct {
	PerSec float64
	Count  uint64
	OK     bool
	Why    string
}

// Row is one netns as top shows it.
type Row struct {
	Inode       uint64
	PID         int
	Comm        string
	Mount       string // its mount (ip netns add), when it has one
	Host        bool
	Pod         *diagnose.CheckPod
	Name        string // output.NetNSName: pod namespace/name, "host", netns NAME, or netns:INODE (comm); raw
	Error       string // it could not be audited: the rest is unknown
	Destination string // the busiest; "" when it connects nowhere
	Used        int    // ports a connect() toward Destination could not have (the held-for-all ones without one)
	Usable      int
	Left        int // ports still free toward Destination
	Percent     int // Used of the ports the kernel tries
	Exhausted   bool
	InUse       int // distinct ports of the range in use, whatever the destination
	HeldForAll  int
	Trend       Trend
	ETA         ETA
	Failures    Rate
	// Culprit is who holds the ports toward Destination and the fix, when
	// it is at the warning mark or above (Culprit.Looked).
	Culprit diagnose.Culprit
}
