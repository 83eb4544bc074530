package top

import (
	"fmt"
	"sort"
)

// SortKey is the order of the rows.
type SortKey int

const (
	SortETA      SortKey = iota // soonest exhaustion first, then the fullest
	SortUsed                    // the highest percent used first
	SortTrend                   // the fastest rising first
	SortFailures                // the most failures per second first
	SortName                    // by name
	sortKeys
)

var sortNames = [...]string{"eta", "used", "trend", "failures", "name"}
var sortTitles = [...]string{"time to exhaustion", "used", "trend", "failures/s", "name"}

func (k SortKey) String() string { return sortNames[k] }

// Title is the key as the header says it.
func (k SortKey) Title() string { return sortTitles[k] }

// Next is the following key, wrapping; by -1 the previous one.
func (k SortKey) Next(by int) SortKey {
	return SortKey(((int(k)+by)%int(sortKeys) + int(sortKeys)) % int(sortKeys))
}

// ParseSort reads a key's name.
func ParseSort(s string) (SortKey, error) {
	for i, n := range sortNames {
		if s == n {
			return SortKey(i), nil
		}
	}
	return 0, fmt.Errorf("unknown sort %q (eta, used, trend, failures, name)", s)
}

// SortRows orders rows by k. Netns that could not be audited come last
// whatever the key (nothing is known to sort them by), then ties go by
// percent used and name.
func SortRows(rows []Row, k SortKey) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if (a.Error != "") != (b.Error != "") {
			return b.Error != ""
		}
		if c := compare(a, b, k); c != 0 {
			return c < 0
		}
		if a.Percent != b.Percent {
			return a.Percent > b.Percent
		}
		return a.Name < b.Name
	})
}

// compare: <0 when a goes before b by k, 0 for a tie.
func compare(a, b *Row, k SortKey) int {
	switch k {
	case SortETA:
		return cmpKnown(a.ETA.OK, b.ETA.OK, float64(a.ETA.In), float64(b.ETA.In))
	case SortUsed:
		return 0 // the tie-break is percent used
	case SortTrend:
		return cmpKnown(a.Trend.OK, b.Trend.OK, -a.Trend.PerMin, -b.Trend.PerMin)
	case SortFailures:
		return cmpKnown(a.Failures.OK, b.Failures.OK, -a.Failures.PerSec, -b.Failures.PerSec)
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// cmpKnown: known values first, the smaller first.
func cmpKnown(aok, bok bool, a, b float64) int {
	switch {
	case aok != bok:
		if aok {
			return -1
		}
		return 1
	case !aok || a == b:
		return 0
	case a < b:
		return -1
	}
	return 1
}
