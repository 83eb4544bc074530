package explain

import (
	"net/netip"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

func attemptEv(tid uint32, fd int32, ns uint64, sys decode.Syscall, addr string) *decode.Event {
	ev := &decode.Event{PID: tid, TID: tid, FD: fd, BootNs: ns, Syscall: sys, Errno: decode.EADDRNOTAVAIL, StartBoottime: 7}
	a := decode.Addr{Valid: true, IP: netip.MustParseAddrPort(addr)}
	if sys == decode.Bind {
		ev.Errno = decode.EADDRINUSE
		ev.Local = a
	} else {
		ev.Remote = a
	}
	return ev
}

// Retries of one thread toward one address are numbered; other threads,
// other addresses, late or far-fd failures start a new attempt; a client's
// bound starts one too.
func TestAttempts(t *testing.T) {
	const ms = uint64(1e6)
	var a Attempts
	dst := "127.0.0.1:8080"
	for i, tc := range []struct {
		ev   *decode.Event
		max  int
		want int
	}{
		{attemptEv(10, 3, 100*ms, decode.Connect, dst), 3, 1},
		{attemptEv(10, 3, 101*ms, decode.Connect, dst), 3, 2},
		// Another thread of a storm, between two retries: its own attempt.
		{attemptEv(11, 3, 101*ms, decode.Connect, dst), 3, 1},
		// Another failure of the same thread in between (written out of
		// kernel order: it waited for its diagnosis) does not break them.
		{attemptEv(10, 3, 100*ms, decode.Connect, "127.0.0.1:53"), 3, 1},
		{attemptEv(10, 4, 102*ms, decode.Connect, dst), 3, 3},
		// Past Go's three tries: the next dial.
		{attemptEv(10, 3, 103*ms, decode.Connect, dst), 3, 1},
		// Another destination.
		{attemptEv(10, 3, 104*ms, decode.Connect, "127.0.0.1:8081"), 3, 1},
		// Too late after the previous.
		{attemptEv(10, 3, 200*ms, decode.Connect, "127.0.0.1:8081"), 3, 1},
		// An fd far from the previous one is another socket's story.
		{attemptEv(10, 9, 201*ms, decode.Connect, "127.0.0.1:8081"), 3, 1},
		// No bound: counts on.
		{attemptEv(10, 9, 202*ms, decode.Connect, "127.0.0.1:8081"), 0, 2},
		{attemptEv(10, 9, 203*ms, decode.Connect, "127.0.0.1:8081"), 0, 3},
		// Ruby's TCPServer: 0.0.0.0:8080, then [::]:8080.
		{attemptEv(12, 5, 300*ms, decode.Bind, "0.0.0.0:8080"), 0, 1},
		{attemptEv(12, 5, 301*ms, decode.Bind, "[::]:8080"), 0, 2},
		// But not a bind to another specific address.
		{attemptEv(12, 5, 302*ms, decode.Bind, "[::1]:8080"), 0, 1},
	} {
		if got := a.Mark(tc.ev, RetryWindowNs, tc.max); got != tc.want {
			t.Errorf("step %d (tid %d fd %d %s): attempt %d, want %d", i, tc.ev.TID, tc.ev.FD, tc.ev.Remote.IP, got, tc.want)
		}
	}
	// A thread id reused by a new process (another start time) is not a retry.
	ev := attemptEv(10, 9, 204*ms, decode.Connect, "127.0.0.1:8081")
	ev.StartBoottime = 8
	if got := a.Mark(ev, RetryWindowNs, 0); got != 1 {
		t.Errorf("a new process with the same tid: attempt %d, want 1", got)
	}
	if n := testing.AllocsPerRun(100, func() { a.Mark(ev, RetryWindowNs, 0) }); n != 0 {
		t.Errorf("Mark allocates %.0f times", n)
	}
}
