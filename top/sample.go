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
	// Node is the node's SNAT and conntrack budgets (node.go), read once
	// per sample beside the audit; NodeWhy says why all or part of it
	// could not be read. Both empty: not asked (Sampler.NodeBudgets nil).
	Node    *diagnose.NodeBudgets
	NodeWhy string
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
// the clock. NodeBudgets, when set, reads the node's SNAT and conntrack
// budgets (diagnose.ReadNodeBudgets, which waits on netlink): Sample calls
// it once per sample, on the sampling goroutine, never the view's.
type Sampler struct {
	Audit         func() ([]diagnose.NetNSReport, error)
	Failures      Counter
	NoFailuresWhy string
	NodeBudgets   func() (*diagnose.NodeBudgets, error)
	Now           func() time.Time
}

// Sample audits the node once (and reads its budgets): Took is the
// time of both, so that the pacing counts the conntrack table's walk.
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
	smp := Sample{NetNS: reps, FailuresWhy: s.NoFailuresWhy}
	if s.NodeBudgets != nil {
		var err error
		if smp.Node, err = s.NodeBudgets(); err != nil {
			smp.NodeWhy = err.Error()
		}
	}
	smp.At = now()
	smp.Took = smp.At.Sub(start)
	if s.Failures != nil {
		smp.Failures, smp.FailuresSince, smp.FailuresWhy = s.Failures.Counts()
	}
	return smp, nil
}
