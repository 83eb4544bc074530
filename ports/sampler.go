package ports

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/tracer"
)

// Config is what a Sampler samples and how.
type Config struct {
	// Audit: the host's netns, the NodePort range, --warn and --crit,
	// the destinations listed per netns (Top), check's findings, and the
	// per-netns socket reader (Iter: the BPF socket iterators; nil:
	// sock_diag) for the netns the walk does not read.
	Audit diagnose.AuditOptions
	// Mounts: also the netns mounted with no process in them (ip netns
	// add), as check and top list them.
	Mounts bool
	// Only: only these netns (check and top's --netns); nil: all.
	Only []uint64
	// Comm: name each netns's process (check, top).
	Comm bool
	// PodOf names the pod whose netns inode is (the trace's names, check
	// and top's runtime); nil, or nil returned: not named. The host's netns
	// is no pod's.
	PodOf func(inode uint64) *diagnose.CheckPod
	// Culprits: the first Culprits destinations of each netns at
	// Audit.Warn or above get who holds their ports and the fix
	// (diagnose.Diagnoser.Culprits: the model's full look at the netns,
	// paid only for those); CulpritsOf, when set, picks the netns (the
	// trace's warnings: named pods only).
	Culprits   int
	CulpritsOf func(*diagnose.NetNSReport) bool
	// NoWalk: read every netns on its own, as before the node walk (the
	// benchmark's comparison; and what a kernel without the walk gets).
	NoWalk bool
	Log    *slog.Logger
}

// Sample is one look at every netns of the node.
type Sample struct {
	At    time.Time
	NetNS []diagnose.NetNSReport // by inode; those not read have Error set
	// Skipped: netns that could not be read (gone before they were
	// reached, or their sockets not listed): in NetNS with Error.
	Skipped int
	Took    time.Duration // the sample's wall time
	// Cut: buckets of the node's hash tables and sockets the walk could
	// not read (chains that kept changing under it). 0 nearly always;
	// else any netns's counts may be low.
	Cut int
	// Reader: "node walk", or "per netns: " and why the walk is not used.
	Reader string
}

// Sampler takes Samples. Its fields are set once, by New; Sample may be
// called from any one goroutine at a time.
type Sampler struct {
	c       Config
	walk    *tracer.NodeWalk // nil: every netns read on its own
	reader  string
	d       *diagnose.Diagnoser // the culprits' (nil: none asked)
	now     func() time.Time
	members func() (map[uint64]int, error) // without the walk
	mounts  func() (map[uint64]string, error)
}

// New makes a Sampler: with the node walk unless c.NoWalk or it cannot be
// loaded (then logged once, and every netns is read on its own).
func New(c Config) *Sampler {
	s := &Sampler{c: c, now: time.Now, members: diagnose.NetNSMembers, mounts: netdiag.NetNSMounts, reader: "node walk"}
	if c.Log == nil {
		s.c.Log = slog.New(slog.DiscardHandler)
	}
	if c.NoWalk {
		s.reader = "per netns: asked for"
	} else if w, err := tracer.NewNodeWalk(); err != nil {
		s.reader = "per netns: " + err.Error()
		s.c.Log.Warn("port sampler: no node walk; each netns's sockets are read on their own, which costs the node's sockets once per netns (docs/performance.md)", "err", err)
	} else {
		s.walk = w
	}
	if c.Culprits > 0 {
		s.d = diagnose.AuditDiagnoser(c.Audit)
	}
	return s
}

// Close unloads the walk.
func (s *Sampler) Close() {
	if s.walk != nil {
		s.walk.Close()
	}
}

// Sample looks at every netns once.
func (s *Sampler) Sample() (*Sample, error) {
	start := s.now()
	out := &Sample{Reader: s.reader}
	w, members, err := s.read()
	if err != nil {
		return nil, err
	}
	mounts := map[uint64]string{}
	if s.c.Mounts {
		if mounts, err = s.mounts(); err != nil {
			return nil, fmt.Errorf("listing the mounted network namespaces: %w", err)
		}
	}
	for _, inode := range s.selected(members, mounts) {
		r := s.report(w, inode, members[inode])
		r.Mount = mounts[inode]
		if !r.Host && s.c.PodOf != nil {
			r.Pod = s.c.PodOf(inode)
		}
		if r.Error != "" {
			out.Skipped++
		} else if s.d != nil && (s.c.CulpritsOf == nil || s.c.CulpritsOf(&r)) {
			s.d.Culprits(&r, s.c.Audit.Warn, s.c.Culprits)
		}
		out.NetNS = append(out.NetNS, r)
	}
	if w != nil {
		out.Cut = w.cut + w.bad
	}
	out.At = s.now()
	out.Took = out.At.Sub(start)
	return out, nil
}

// read walks the node (nil without the walk) and lists the netns with a
// process in them.
func (s *Sampler) read() (*walked, map[uint64]int, error) {
	if s.walk == nil {
		m, err := s.members()
		return nil, m, err
	}
	sec, ms, err := portmodel.KernelClock()
	if err != nil {
		return nil, nil, err
	}
	w := newWalked(sec, ms)
	if err := s.walk.Walk(w, true); err != nil {
		return nil, nil, err
	}
	return w, w.members, nil
}

// selected are the netns to report: those with a process, and the mounted
// ones when asked; only c.Only's when given. By inode.
func (s *Sampler) selected(members map[uint64]int, mounts map[uint64]string) []uint64 {
	var out []uint64
	if s.c.Only != nil {
		out = slices.Clone(s.c.Only)
	} else {
		for ino := range members {
			out = append(out, ino)
		}
		for ino := range mounts {
			if _, ok := members[ino]; !ok {
				out = append(out, ino)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// report is one netns's report: from the walk's tally when the walk read
// it, else read on its own.
func (s *Sampler) report(w *walked, inode uint64, pid int) diagnose.NetNSReport {
	var n *walkedNetNS
	if w != nil && inode <= 1<<32-1 {
		n = w.netns[uint32(inode)]
	}
	if n == nil || n.own {
		return diagnose.AuditNetNS(inode, pid, s.c.Audit)
	}
	r := diagnose.NetNSReport{Inode: inode, PID: pid, Host: inode == s.c.Audit.HostNetNS}
	if s.c.Comm {
		r.Comm = diagnose.ProcComm(pid)
	}
	diagnose.AuditTally(&r, w.tallyOf(n), &n.ps, string(netdiag.SourceIterator), s.c.Audit)
	return r
}
