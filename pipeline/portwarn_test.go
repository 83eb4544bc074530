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
// no pod; a pod whose name is not known is counted, not guessed, once it
// has stayed unnamed for unnamedGrace (TestPortWarningNamePending).
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
	if sink.unnamed != 0 {
		t.Errorf("%d unnamed warnings at the first sample, want 0 (netns 3's name may be pending)", sink.unnamed)
	}
	w.sampled(&ports.Sample{At: at.Add(unnamedGrace), NetNS: []diagnose.NetNSReport{
		{Inode: 3, PID: 43, Destinations: []diagnose.Destination{dest("10.0.0.4:80", 90)}},
		{Inode: 4, PID: 44, Destinations: []diagnose.Destination{dest("10.0.0.5:80", 95)}},
	}})
	if sink.unnamed != 1 {
		t.Errorf("%d unnamed warnings, want 1 (netns 3's pod still has no name; netns 4 is no pod's)", sink.unnamed)
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

// TestPortWarningNamePending: a pod's netns over the mark whose name is
// still pending at the first samples that find it (the runtime not yet
// listed, or its list late) drops nothing: once named, its warning goes
// out; a name that never comes is counted once unnamedGrace has passed,
// at each sample after, and a netns gone or under the mark starts again.
func TestPortWarningNamePending(t *testing.T) {
	sink := &fakeSink{}
	w := newPortWarnings(sink, 80, slog.New(slog.DiscardHandler))
	w.podUID = func(int) string { return "uid-web" }
	over := diagnose.Destination{Remote: "10.0.0.2:80", Percent: 90}
	over.Verdict = "ephemeral ports nearly exhausted toward 10.0.0.2:80"
	netns := func(pod *diagnose.CheckPod) []diagnose.NetNSReport {
		return []diagnose.NetNSReport{{Inode: 7, PID: 42, Pod: pod, Destinations: []diagnose.Destination{over, over}}}
	}
	web := &diagnose.CheckPod{Namespace: "shop", Name: "web", UID: "uid-web"}
	at := time.Unix(1700000000, 0)
	for i, step := range []struct {
		after         time.Duration
		pod           *diagnose.CheckPod
		gone          bool
		unnamed, sent int
	}{
		{0, nil, false, 0, 0},                      // pending: the first sample asked for the name
		{300 * time.Millisecond, nil, false, 0, 0}, // still within the grace
		{time.Second, web, false, 0, 2},            // named: both destinations warned
		{2 * time.Second, nil, false, 0, 2},        // unnamed again (the pod's list failed): pending again
		{unnamedGrace + time.Second, nil, false, 0, 2},
		{unnamedGrace + 2*time.Second, nil, false, 2, 2}, // unnamed for the grace: both counted
		{unnamedGrace + 3*time.Second, nil, true, 2, 2},  // gone: forgotten
		{unnamedGrace + 4*time.Second, nil, false, 2, 2}, // back: pending again
	} {
		s := &ports.Sample{At: at.Add(step.after)}
		if !step.gone {
			s.NetNS = netns(step.pod)
		}
		w.sampled(s)
		if sink.unnamed != step.unnamed || len(sink.got) != step.sent {
			t.Errorf("sample %d (+%v): %d unnamed, %d sent; want %d, %d", i, step.after, sink.unnamed, len(sink.got), step.unnamed, step.sent)
		}
	}
}
