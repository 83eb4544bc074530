package diagnose

import (
	"net/netip"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
)

// A timeout whose drops the reader has not read yet is not "beyond the
// node": the diagnosis waits for the reader's mark to pass the failure, and
// when it does not within dropsBehindWait says it cannot know. On a clock
// the test moves: the mark moves with it or stays behind.
func TestNodeLayerWaitsForTheReader(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)
	ev := &decode.Event{Syscall: decode.Connect, Async: true, AsyncAfter: 3 * time.Second, Time: t0,
		Local:  decode.Addr{IP: netip.MustParseAddrPort("10.98.1.2:40000")},
		Remote: decode.Addr{IP: netip.MustParseAddrPort("198.18.0.2:8080")}}
	for _, c := range []struct {
		name    string
		lag     time.Duration // the mark is this far behind the clock
		want    string
		waitMin time.Duration
	}{
		{"caught up", 0, CauseBeyondNode, 0},
		{"behind, catches up", -time.Second, CauseBeyondNode, time.Second},
		{"behind for good", -time.Hour, CauseNodeMaybeMissed, dropsBehindWait},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := t0
			b := NewDropBook(16)
			b.since = t0.Add(-time.Hour)
			b.now = func() time.Time { return now }
			b.sleep = func(d time.Duration) { now = now.Add(d) }
			b.Drained = func() time.Time { return now.Add(c.lag) }
			d := NewDiagnoser()
			d.NodeDrops = b
			g := &Diagnosis{}
			d.nodeLayer(ev, g)
			if g.Cause != c.want || now.Sub(t0) < c.waitMin || now.Sub(t0) > dropsBehindWait+drainPoll {
				t.Errorf("%s after %v: %s; want %s after %v at least", g.Cause, now.Sub(t0), g.Verdict, c.want, c.waitMin)
			}
		})
	}
}
