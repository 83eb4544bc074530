package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// CgroupLimitKey names a cgroup's rate limit bucket (--rate-limit-cgroup):
// the cgroup, the errno (Err) and the syscall (bpf/eaddr.h, struct
// cgroup_limit_key).
type CgroupLimitKey = eaddrCgroupLimitKey

// configureRates sets the rate limit's buckets: the key's (Rate) and the
// cgroup's (CgroupRate), which works with the key's. A cgroup bucket that
// is off leaves its maps at one entry each (preallocated LRU maps: no
// memory for what is off).
func configureRates(v *eaddrVariableSpecs, m *eaddrMapSpecs, opts *Options, set func(*ebpf.VariableSpec, any)) error {
	switch {
	case opts.Rate < 0:
		return fmt.Errorf("rate limit %v is negative", opts.Rate)
	case opts.CgroupRate < 0:
		return fmt.Errorf("cgroup rate limit %v is negative", opts.CgroupRate)
	case opts.CgroupRate > 0 && opts.Rate == 0:
		return fmt.Errorf("a cgroup rate limit (%v/s) works with the rate limit per key, which is off", opts.CgroupRate)
	}
	if opts.Rate > 0 {
		interval, tolerance := gcra(opts.Rate)
		set(v.LimitIntervalNs, interval)
		set(v.LimitToleranceNs, tolerance)
	}
	if opts.CgroupRate == 0 {
		m.CgroupLimits.MaxEntries, m.CgroupCounts.MaxEntries = 1, 1
		return nil
	}
	interval, tolerance := gcra(opts.CgroupRate)
	set(v.CgIntervalNs, interval)
	set(v.CgToleranceNs, tolerance)
	return nil
}

// CgroupLimitStates calls fn with each cgroup bucket that held back
// failures and how many, summed over CPUs, since its count was made, and
// returns every failure the cgroups' buckets held back (the per-CPU
// totals, which also hold what an evicted bucket's count had). A count read
// while a CPU moves it from its slot to cgroup_counts may come out short,
// never long: the map is read before the slots. No allocation once warm.
func (t *Tracer) CgroupLimitStates(fn func(k CgroupLimitKey, held uint64)) (total uint64, err error) {
	if err := t.warmLimitBuffers(); err != nil {
		return 0, err
	}
	err = sumCounts(t, t.objs.CgroupCounts, t.groupKeys, t.groupSums, func(c *eaddrLimitCpu) (CgroupLimitKey, uint64) {
		total += c.CgSuppressed
		return c.CgKey, c.CgHeld
	})
	if err != nil {
		return 0, fmt.Errorf("reading the cgroup rate limit's counts: %w", err)
	}
	for k, n := range t.groupSums {
		fn(k, n)
	}
	return total, nil
}
