package pipeline

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/ports"
)

type fakeSink struct {
	got     []kubeevent.Failure
	unnamed int
}

func (f *fakeSink) Report(x kubeevent.Failure) bool { f.got = append(f.got, x); return true }
func (f *fakeSink) UnnamedWarning()                 { f.unnamed++ }

// TestPortWarnings: of a sample, only a named pod's destination at or
// above --warn becomes a warning, and only when the second look at the
// netns (the sampler's culprit of it) still finds it so; the host's netns
// never does (hostNetwork pods share it), nor a netns whose process is in
// no pod; a pod whose name is not known is counted, not guessed.
func TestPortWarnings(t *testing.T) {
	sink := &fakeSink{}
	w := newPortWarnings(sink, 80, slog.New(slog.DiscardHandler))
	w.podUID = func(pid int) string {
		if pid == 43 {
			return "uid-unnamed" // in a pod's cgroup; 44 is in none
		}
		return ""
	}
	dest := func(remote string, pct int) diagnose.Destination {
		d := diagnose.Destination{Remote: remote, Percent: pct}
		if pct >= 80 {
			d.Verdict, d.Fix = "ephemeral ports nearly exhausted toward "+remote, []string{"reuse connections"}
		}
		return d
	}
	below := dest("10.0.0.2:81", 80)
	below.Verdict, below.Fix, below.Unknown = "", nil, "below 80% at a second look: the sockets changed since the audit"
	at := time.Unix(1700000000, 0)
	w.sampled(&ports.Sample{At: at, NetNS: []diagnose.NetNSReport{
		{Inode: 1, PID: 1, Host: true, Destinations: []diagnose.Destination{dest("10.0.0.1:80", 99)}},
		{Inode: 2, PID: 42, Pod: &diagnose.CheckPod{Namespace: "shop", Name: "web", UID: "uid-web"},
			Destinations: []diagnose.Destination{dest("10.0.0.2:80", 85), below, dest("10.0.0.3:80", 79)}},
		{Inode: 3, PID: 43, Destinations: []diagnose.Destination{dest("10.0.0.4:80", 90)}},
		{Inode: 4, PID: 44, Destinations: []diagnose.Destination{dest("10.0.0.5:80", 95)}},
	}})
	if sink.unnamed != 1 {
		t.Errorf("%d unnamed warnings, want 1 (netns 3's pod has no name; netns 4 is no pod's)", sink.unnamed)
	}
	if len(sink.got) != 1 {
		t.Fatalf("%d warnings %+v, want 1", len(sink.got), sink.got)
	}
	f := sink.got[0]
	if f.PodUID != "uid-web" || f.PodName != "web" || f.Namespace != "shop" || f.Reason != kubeevent.ReasonNearlyExhausted ||
		f.Dest != netip.MustParseAddrPort("10.0.0.2:80") || f.Verdict != "ephemeral ports nearly exhausted toward 10.0.0.2:80" ||
		f.Fix != "reuse connections" || f.Count != 1 || !f.At.Equal(at) {
		t.Errorf("warning %+v", f)
	}
}
