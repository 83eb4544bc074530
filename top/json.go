package top

import (
	"encoding/json"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// Snapshot is the JSON form of the newest sample (docs/top.md). A value
// not known is left out and a *_unknown field says why; never a 0.
type Snapshot struct {
	Time            string  `json:"time"`
	IntervalSeconds float64 `json:"interval_seconds"`
	SampleSeconds   float64 `json:"sample_seconds"`
	Sort            string  `json:"sort"`
	FailuresUnknown string  `json:"failures_unknown,omitempty"`
	// Node: the node's SNAT and conntrack budgets (nodejson.go); left
	// out when they are not read.
	Node  *NodeJSON  `json:"node,omitempty"`
	NetNS []NetNSRow `json:"netns"`
}

// NetNSRow is one row of a Snapshot.
type NetNSRow struct {
	Inode               uint64             `json:"inode"`
	PID                 int                `json:"pid,omitempty"`
	Comm                string             `json:"comm,omitempty"`
	Mount               string             `json:"mount,omitempty"`
	Name                string             `json:"name"`
	Host                bool               `json:"host_network"`
	Pod                 *diagnose.CheckPod `json:"pod,omitempty"`
	Error               string             `json:"error,omitempty"`
	Destination         string             `json:"destination,omitempty"`
	Used                *int               `json:"used,omitempty"`
	Usable              *int               `json:"usable,omitempty"`
	Left                *int               `json:"left,omitempty"`
	Percent             *int               `json:"percent,omitempty"`
	Exhausted           bool               `json:"exhausted,omitempty"`
	InUse               *int               `json:"ports_in_use,omitempty"`
	HeldForAll          *int               `json:"held_for_all,omitempty"`
	TrendPerMin         *float64           `json:"trend_ports_per_min,omitempty"`
	TrendSamples        int                `json:"trend_samples,omitempty"`
	TrendUnknown        string             `json:"trend_unknown,omitempty"`
	SecondsToExhaustion *float64           `json:"seconds_to_exhaustion,omitempty"`
	ExhaustionUnknown   string             `json:"exhaustion_unknown,omitempty"`
	FailuresPerSec      *float64           `json:"failures_per_second,omitempty"`
	FailuresUnknown     string             `json:"failures_unknown,omitempty"`
	// the destination's cause, verdict, holders and fix at the warning
	// mark or above, as check gives them (or culprit_unknown: why not)
	diagnose.Culprit
}

// Snapshot is the newest sample's rows in m.Sort's order; interval is the
// wait before the next sample (paced: Pace's).
func (m *Model) Snapshot(interval time.Duration) Snapshot {
	s := Snapshot{Time: m.last.At.UTC().Format(time.RFC3339Nano), IntervalSeconds: interval.Seconds(),
		SampleSeconds: m.last.Took.Seconds(), Sort: m.Sort.String(), Node: m.nodeJSON(), NetNS: []NetNSRow{}}
	if m.last.Failures == nil {
		s.FailuresUnknown = m.last.FailuresWhy
	}
	for _, r := range m.Rows() {
		s.NetNS = append(s.NetNS, jsonRow(&r))
	}
	return s
}

// JSON is Snapshot as one line.
func (m *Model) JSON(interval time.Duration) ([]byte, error) {
	return json.Marshal(m.Snapshot(interval))
}

// jsonRow is r with what is not known left out.
func jsonRow(r *Row) NetNSRow {
	j := NetNSRow{Inode: r.Inode, PID: r.PID, Comm: r.Comm, Mount: r.Mount, Name: r.Name, Host: r.Host, Pod: r.Pod, Error: r.Error}
	if r.Error == "" {
		j.Destination, j.Exhausted, j.Culprit = r.Destination, r.Exhausted, r.Culprit
		j.Used, j.Usable, j.Left, j.Percent = ptr(r.Used), ptr(r.Usable), ptr(r.Left), ptr(r.Percent)
		j.InUse, j.HeldForAll = ptr(r.InUse), ptr(r.HeldForAll)
	}
	if r.Trend.OK {
		j.TrendPerMin, j.TrendSamples = ptr(r.Trend.PerMin), r.Trend.Samples
	} else {
		j.TrendUnknown = r.Trend.Why
	}
	if r.ETA.OK {
		j.SecondsToExhaustion = ptr(r.ETA.In.Seconds())
	} else {
		j.ExhaustionUnknown = r.ETA.Why
	}
	if r.Failures.OK {
		j.FailuresPerSec = ptr(r.Failures.PerSec)
	} else {
		j.FailuresUnknown = r.Failures.Why
	}
	return j
}

func ptr[T any](v T) *T { return &v }
