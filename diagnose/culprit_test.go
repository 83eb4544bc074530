package diagnose

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Culprits gives a warned destination of the audit the diagnosis Nearly
// gives it, holders and fix, and none to a destination below the mark;
// a destination that fell below the mark since the audit says so instead
// of naming anyone.
func TestCulprits(t *testing.T) {
	s := newNearlyScene(t)
	s.dial(t, 9)
	o := AuditOptions{Top: 3, Warn: 70, Crit: 90, NodePortLo: 30000, NodePortHi: 32767, Findings: true}
	d := AuditDiagnoser(o)
	r := AuditNetNS(s.ns.Inode(), s.pid, o)
	if len(r.Destinations) != 1 {
		t.Fatalf("destinations %+v, want the one dialled", r.Destinations)
	}
	d.Culprits(&r, 70, 3)
	want, err := d.Nearly(s.ns.Inode(), s.pid, s.dst, 70)
	if err != nil || want == nil {
		t.Fatalf("Nearly: %v %v", want, err)
	}
	c := r.Destinations[0].Culprit
	if c.Cause != CausePerDestination || c.Verdict != want.Verdict || !slices.Equal(c.Fix, want.Fix) || len(c.Holders) != 1 ||
		c.Holders[0].PID != os.Getpid() || c.Holders[0].Sockets != 9 || c.Unknown != "" || !c.Looked() {
		t.Errorf("culprit %+v; want Nearly's %+v", c, want)
	}

	r.Destinations = append(r.Destinations, Destination{Remote: s.dst.String(), Percent: 60})
	r.Destinations[0].Culprit = Culprit{}
	r.Destinations[0].Percent = 100 // as if the audit had seen 10 of 10: the second look sees 9
	d.Culprits(&r, 95, 3)
	if c := r.Destinations[0].Culprit; c.Cause != "" || len(c.Holders) != 0 || !strings.Contains(c.Unknown, "below 95% at a second look") {
		t.Errorf("fell below the mark: %+v, want why, and no one named", c)
	}
	if r.Destinations[1].Looked() {
		t.Errorf("a destination below the mark got a culprit: %+v", r.Destinations[1].Culprit)
	}
}
