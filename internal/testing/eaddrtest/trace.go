package eaddrtest

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"golang.org/x/sys/unix"
)

// Exhausted returns a fresh netns whose two-port range is held by two
// connections to host:8080. Everything is removed when the test ends.
func Exhausted(t *testing.T, network, host string) *netns.NS {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ex, err := netns.Exhaust(ns, network, net.JoinHostPort(host, "8080"), 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ns
}

// RunInNS runs argv in ns and returns its pid and combined output.
func RunInNS(t *testing.T, ns *netns.NS, argv ...string) (int, string) {
	t.Helper()
	out, pid, err := RunIn(context.Background(), ns, argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return pid, out
}

func Python(t *testing.T) string {
	t.Helper()
	p := demo.Python3()
	if p == "" {
		testenv.Missing(t, "python3", "python3")
	}
	return p
}

// CheckPrediction: the line eaddr predicts for the event is a line the
// client really printed (a template's <...> parts match anything), and the
// binary was classified right. A client eaddr has no wording for must say
// "unknown" and give an errno text the client really printed.
func CheckPrediction(t *testing.T, cl demo.Client, ev JSONEvent, printed string) {
	t.Helper()
	if ev.Explain == nil {
		t.Errorf("event has no explain object")
		return
	}
	x := ev.Explain
	if x.Meaning == "" {
		t.Errorf("explain lacks the meaning: %+v", x)
	}
	if cl.Libc != "" && x.Libc != cl.Libc {
		t.Errorf("libc %q, want %q", x.Libc, cl.Libc)
	}
	t.Logf("%s: eaddr predicted %q (%s, %s, %s), grep %q", cl.Name, x.ClientMessage, x.Client, x.Confidence, x.Libc, x.Grep)
	if cl.Unknown {
		if x.Client != "unknown" || x.ClientMessage != "" || x.ClientUnknown == "" {
			t.Errorf("%s: want client \"unknown\" with a reason and no line, got %+v", cl.Name, x)
		}
		for _, g := range x.Grep {
			if strings.Contains(printed, g) {
				return
			}
		}
		t.Errorf("%s printed\n%s\nwhich has none of eaddr's grep texts %q", cl.Name, printed, x.Grep)
		return
	}
	for _, line := range strings.Split(printed, "\n") {
		if x.ClientMessage != "" && JudgeWording(x.ClientMessage, line) == "exact" {
			return
		}
	}
	t.Errorf("%s (%s, %s) printed\n%s\neaddr predicted\n%s", cl.Name, x.Client, x.Libc, printed, x.ClientMessage)
}

// Sentinel makes this test process fail one syscall in the host netns and
// waits up to 5s for the trace to report it: "bind" fails bind() with
// EADDRNOTAVAIL (192.0.2.1, on no interface, at a random port), "connect"
// fails a blocking connect() with ECONNREFUSED (a loopback port nothing
// listens on; reported only with --errno all). The pipeline writes
// events in the ring's order, so once the sentinel's event is out every
// event of an earlier failure is too: a "nothing arrived" check after it
// means nothing, not "not yet". Fails the test if the sentinel is not seen
// within 30 s: a liveness bound, not a latency one (its binary's analysis
// and its diagnosis each wait up to their bound, longer on a busy node).
func (p *TraceProc) Sentinel(t *testing.T, kind string) {
	t.Helper()
	self := os.Getpid()
	n := len(p.ForPID(self, 0, 0))
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	want := unix.EADDRNOTAVAIL
	switch kind {
	case "bind":
		// A port of its own: the rate limit keys on the address, and other
		// tests on the node fail bind() to 192.0.2.1 too.
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: 1024 + mrand.IntN(64000), Addr: [4]byte{192, 0, 2, 1}})
	case "connect":
		want = unix.ECONNREFUSED
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: ClosedPort(t), Addr: [4]byte{127, 0, 0, 1}})
	default:
		t.Fatalf("sentinel %q: not bind or connect", kind)
	}
	if !errors.Is(err, want) {
		t.Fatalf("sentinel %s: %v, want %v", kind, err, want)
	}
	evs := p.ForPID(self, n+1, 30*time.Second)
	if len(evs) <= n {
		t.Fatalf("the sentinel %s (%v) was not reported within 30s: the trace was not listening", kind, want)
	}
	if ev := evs[n]; ev.Syscall != kind || ev.ErrnoNum != int(want) {
		t.Fatalf("sentinel event %s %s, want %s %v", ev.Syscall, ev.Errno, kind, want)
	}
}

// ClosedPort returns a loopback TCP port of the host netns that nothing
// listens on: it was bound and released again.
func ClosedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
