package kernel

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/hungfs"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A failing program whose binary eaddr cannot read (a FUSE file system that
// answers every read but eaddr's, which it never answers, as a hung NFS or
// FUSE volume does) cannot stop the trace: its event arrives, saying why it
// names no client; another program's failure arrives meanwhile, classified;
// the stuck read is counted, /healthz stays 200, and the file system's
// other binaries are not read; once the read returns and the binary is
// looked at again, the program's events are classified.
func TestHungFileDoesNotStopTheTrace(t *testing.T) {
	ns := eaddrtest.Exhausted(t, "tcp4", "127.0.0.1")
	bb, err := os.ReadFile(testenv.Program(t, "busybox", "busybox-static"))
	if err != nil {
		t.Fatal(err)
	}
	curl := testenv.Program(t, "curl", "curl")
	p := eaddrtest.StartTrace(t, "--netns", strconv.FormatUint(ns.Inode(), 10), "--metrics-addr", "127.0.0.1:0")
	base := p.MetricsURL(t)
	// Mounted after the trace started, so released and unmounted before it
	// is stopped: the kernel keeps a process whose FUSE read was taken
	// until the daemon answers, even killed.
	h := hungfs.Mount(t, map[string][]byte{"busybox": bb, "other/busybox": bb})
	h.HangFor(p.Cmd.Process.Pid)
	wget := func(path string) eaddrtest.JSONEvent {
		t.Helper()
		pid, _ := eaddrtest.RunInNS(t, ns, hungfs.Argv(path, "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/")...)
		evs := p.ForPID(pid, 1, time.Minute)
		if len(evs) != 1 || evs[0].Explain == nil {
			t.Fatalf("busybox wget from %s (pid %d): %d events, want 1 with an explanation", path, pid, len(evs))
		}
		return evs[0]
	}
	fuseBB := filepath.Join(h.Dir, "busybox")

	x := wget(fuseBB).Explain
	if x.Client != "unknown" || !strings.Contains(x.ClientUnknown, "its analysis had not finished 1s after it was asked") {
		t.Errorf("the hung binary's first event: client %q, %q; want unknown, its analysis not finished", x.Client, x.ClientUnknown)
	}
	waitUntil(t, "eaddr's read of busybox to reach the FUSE daemon", func() bool { return h.Hung() > 0 })

	pid, _ := eaddrtest.RunInNS(t, ns, curl, "-sS", "-m", "5", "http://127.0.0.1:8080/")
	if evs := p.ForPID(pid, 1, time.Minute); len(evs) != 1 || evs[0].Explain == nil || evs[0].Explain.Client != "curl" {
		t.Fatalf("curl's failure while eaddr's read of busybox hangs: %+v; want its event, client curl", evs)
	}

	waitUntil(t, "eaddr_binary_analyses_stuck 1", func() bool { return gauge(t, base, "eaddr_binary_analyses_stuck") == 1 })
	if code := healthz(t, base); code != http.StatusOK {
		t.Errorf("/healthz %d while an analysis is stuck; want 200: the reader is not", code)
	}
	if x := wget(fuseBB).Explain; x.Client != "unknown" || !strings.Contains(x.ClientUnknown, "a read of its file has not returned for 5s or more") {
		t.Errorf("the stuck binary's next event: client %q, %q; want unknown, its read not returned", x.Client, x.ClientUnknown)
	}
	other := wget(filepath.Join(h.Dir, "other", "busybox")).Explain
	if other.Client != "unknown" || !strings.Contains(other.ClientUnknown, "a read of another binary on the same file system") {
		t.Errorf("another binary of the hung file system: client %q, %q; want unknown, not read", other.Client, other.ClientUnknown)
	}

	// The read returns: that analysis took longer than its 1 s budget and
	// says so; the binary is looked at again once the negative cache's
	// 10 s are over, and then read at once.
	h.Release()
	waitUntil(t, "eaddr_binary_analyses_stuck 0", func() bool { return gauge(t, base, "eaddr_binary_analyses_stuck") == 0 })
	x = wget(fuseBB).Explain
	if !strings.Contains(x.ClientUnknown, "reading it took longer than 1s") {
		t.Errorf("after the read returned: client %q, %q; want the time budget's reason", x.Client, x.ClientUnknown)
	}
	waitUntil(t, "busybox wget from the file system to be classified", func() bool {
		time.Sleep(time.Second)
		return wget(fuseBB).Explain.Client == "busybox wget"
	})
	c := p.Stop(t)
	if c["binaries_late"] != 2 || c["binaries_skipped"] != 1 || c["binaries_stuck"] != 0 || c["binaries_given_up"] != 1 {
		t.Errorf("stopped line %v; want binaries_late 2, binaries_skipped 1, binaries_stuck 0, binaries_given_up 1", c)
	}
}

// waitUntil polls cond for up to a minute: what a test waits for, not a
// bound it asserts.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// gauge is the value of an unlabelled gauge, -1 when it is missing.
func gauge(t *testing.T, base, name string) float64 {
	t.Helper()
	if f := eaddrtest.Scrape(t, base)[name]; f != nil && len(f.GetMetric()) == 1 {
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	return -1
}

func healthz(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
