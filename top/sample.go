package top

import (
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// Sample is one look at the node: the audit of every netns and the
// failures counted so far.
type Sample struct {
	At    time.Time
	Took  time.Duration // the audit's time: Pace stretches the wait after it
	NetNS []diagnose.NetNSReport
	// Failures counts, per netns inode, the failures the tracer saw since
	// FailuresSince; nil with FailuresWhy when they are not counted.
	Failures      map[uint64]uint64
	FailuresSince time.Time
	FailuresWhy   string
}

// Counter is the source of failures per netns (FailureCounter).
type Counter interface {
	// Counts returns the failures per netns inode since the time returned,
	// or nil and why they are not counted.
	Counts() (counts map[uint64]uint64, since time.Time, why string)
}

// Sampler takes Samples: Audit audits the node's netns (cmd/eaddr wires
// diagnose.AuditNetNS over diagnose.NetNSMembers, as `eaddr check` does),
// Failures counts failures (nil: not counted, with NoFailuresWhy), Now is
// the clock.
type Sampler struct {
	Audit         func() ([]diagnose.NetNSReport, error)
	Failures      Counter
	NoFailuresWhy string
	Now           func() time.Time
}

// Sample audits the node once.
func (s *Sampler) Sample() (Sample, error) {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	reps, err := s.Audit()
	if err != nil {
		return Sample{}, err
	}
	at := now()
	smp := Sample{At: at, Took: at.Sub(start), NetNS: reps, FailuresWhy: s.NoFailuresWhy}
	if s.Failures != nil {
		smp.Failures, smp.FailuresSince, smp.FailuresWhy = s.Failures.Counts()
	}
	return smp, nil
}
