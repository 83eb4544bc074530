package diagnose

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/sockscene"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// TestAuditUsesTheModel: check's audit counts what the diagnosis counts.
// Ports held for every destination by bound sockets are no destination's,
// yet no connect() can have them; ports held toward one destination make
// it exhausted, and a server's accepted sockets are no destination.
func TestAuditUsesTheModel(t *testing.T) {
	testenv.RequireRoot(t)
	it, err := tracer.NewSockIter()
	if err != nil {
		testenv.Skip(t, "no BPF socket iterator: "+err.Error())
	}
	t.Cleanup(func() { it.Close() })
	o := AuditOptions{Iter: it, Top: 3, Warn: 70, Crit: 90, NodePortLo: 30000, NodePortHi: 32767, Findings: true}

	bound := sockscene.Build(t, "bound-only")
	startIn(t, bound.NS)
	r := AuditNetNS(bound.NS.Inode(), 0, o)
	if r.HeldForAll != 10 || r.Unsure != 0 || r.Source != "iterator" || len(r.Destinations) != 0 {
		t.Errorf("bound-only: held for all %d, unsure %d, from %q, destinations %+v; want 10, 0, the iterator, none", r.HeldForAll, r.Unsure, r.Source, r.Destinations)
	}

	est := sockscene.Build(t, "established")
	startIn(t, est.NS)
	r = AuditNetNS(est.NS.Inode(), 0, o)
	if len(r.Destinations) != 1 || r.Destinations[0].Remote != est.Remote.String() || !r.Destinations[0].Exhausted || r.Worst != SevCritical {
		t.Errorf("established: destinations %+v, worst %v; want only %s, exhausted, critical", r.Destinations, r.Worst, est.Remote)
	}
}
