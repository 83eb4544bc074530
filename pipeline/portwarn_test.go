package pipeline

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/kubeevent"
)

type fakeSink struct {
	got     []kubeevent.Failure
	unnamed int
}

func (f *fakeSink) Report(x kubeevent.Failure) bool { f.got = append(f.got, x); return true }
func (f *fakeSink) UnnamedWarning()                 { f.unnamed++ }

// TestPortWarnings: of a sample, only a named pod's destination at or
// above --warn becomes a warning, and only when the second look at the
// netns still finds it so; the host's netns never does (hostNetwork pods
// share it), nor a netns whose process is in no pod; a pod whose name is
// not known is counted, not guessed.
func TestPortWarnings(t *testing.T) {
	sink := &fakeSink{}
	w := newPortWarnings(sink, 80, 1, slog.New(slog.DiscardHandler))
	var looked []string
	w.nearly = func(inode uint64, pid int, dst netip.AddrPort, warn int) (*diagnose.Diagnosis, error) {
		looked = append(looked, dst.String())
		if warn != 80 || pid != 42 {
			t.Errorf("nearly(%d, %d, %s, %d): want pid 42 and --warn 80", inode, pid, dst, warn)
		}
		if dst.Port() == 81 {
			return nil, nil // below the mark at the second look
		}
		return &diagnose.Diagnosis{Verdict: "ephemeral ports nearly exhausted toward " + dst.String(), Fix: []string{"reuse connections"}}, nil
	}
	w.podUID = func(pid int) string {
		if pid == 43 {
			return "uid-unnamed" // in a pod's cgroup; 44 is in none
		}
		return ""
	}
	dest := func(remote string, pct int) diagnose.Destination {
		return diagnose.Destination{Remote: remote, Percent: pct}
	}
	w.sampled(&PortSample{NetNS: []NetNSPorts{
		{Inode: 1, PID: 1, Host: true, Top: []diagnose.Destination{dest("10.0.0.1:80", 99)}},
		{Inode: 2, PID: 42, Namespace: "shop", Pod: "web", PodUID: "uid-web",
			Top: []diagnose.Destination{dest("10.0.0.2:80", 85), dest("10.0.0.2:81", 80), dest("10.0.0.3:80", 79)}},
		{Inode: 3, PID: 43, Top: []diagnose.Destination{dest("10.0.0.4:80", 90)}},
		{Inode: 4, PID: 44, Top: []diagnose.Destination{dest("10.0.0.5:80", 95)}},
	}})
	if len(looked) != 2 || looked[0] != "10.0.0.2:80" || looked[1] != "10.0.0.2:81" {
		t.Errorf("looked again at %q, want the pod's two destinations at or above 80%% only", looked)
	}
	if sink.unnamed != 1 {
		t.Errorf("%d unnamed warnings, want 1 (netns 3's pod has no name; netns 4 is no pod's)", sink.unnamed)
	}
	if len(sink.got) != 1 {
		t.Fatalf("%d warnings %+v, want 1", len(sink.got), sink.got)
	}
	f := sink.got[0]
	if f.PodUID != "uid-web" || f.PodName != "web" || f.Namespace != "shop" || f.Reason != kubeevent.ReasonNearlyExhausted ||
		f.Dest != netip.MustParseAddrPort("10.0.0.2:80") || f.Verdict != "ephemeral ports nearly exhausted toward 10.0.0.2:80" ||
		f.Fix != "reuse connections" || f.Count != 1 {
		t.Errorf("warning %+v", f)
	}
}
