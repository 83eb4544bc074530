package explain

import (
	"fmt"
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
		if got := a.Mark(tc.ev, RetryRule{WindowNs: RetryWindowNs, Max: tc.max}); got != tc.want {
			t.Errorf("step %d (tid %d fd %d %s): attempt %d, want %d", i, tc.ev.TID, tc.ev.FD, tc.ev.Remote.IP, got, tc.want)
		}
	}
	// A thread id reused by a new process (another start time) is not a retry.
	ev := attemptEv(10, 9, 204*ms, decode.Connect, "127.0.0.1:8081")
	ev.StartBoottime = 8
	if got := a.Mark(ev, RetryRule{WindowNs: RetryWindowNs}); got != 1 {
		t.Errorf("a new process with the same tid: attempt %d, want 1", got)
	}
	if n := testing.AllocsPerRun(100, func() { a.Mark(ev, RetryRule{WindowNs: RetryWindowNs, AnyThread: true}) }); n != 0 {
		t.Errorf("Mark allocates %.0f times", n)
	}
}

// threadEv is a failure of thread tid of process 100.
func threadEv(tid uint32, fd int32, ns uint64) *decode.Event {
	ev := attemptEv(tid, fd, ns, decode.Connect, "127.0.0.1:8080")
	ev.PID = 100
	return ev
}

// Go's dialer retries on whichever thread the scheduler gives the
// goroutine (seen under load: [1 1 2] for one printed line): with
// AnyThread a try on another thread of the process continues the attempt
// on the same fd, unless another thread's attempt toward the failure is
// open, when which one it continues would be a guess (then 1, as
// without AnyThread). Without AnyThread (a C program's threads are its
// own attempts) another thread always starts its own.
func TestAttemptsAcrossThreads(t *testing.T) {
	const ms = uint64(1e6)
	goRule := RetryRule{WindowNs: RetryWindowNs, Max: 3, AnyThread: true}
	for _, tc := range []struct {
		name string
		rule RetryRule
		evs  []*decode.Event
		want []int
	}{
		{"one dial moves thread twice", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 7, 100*ms+40e3), threadEv(3, 7, 100*ms+60e3)}, []int{1, 2, 3}},
		{"and back to its first thread", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 7, 101*ms), threadEv(1, 7, 102*ms)}, []int{1, 2, 3}},
		{"past the client's tries: the next dial", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 7, 101*ms), threadEv(3, 7, 102*ms), threadEv(4, 7, 103*ms)}, []int{1, 2, 3, 1}},
		{"another fd on another thread: another socket's story", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 8, 101*ms)}, []int{1, 1}},
		{"late on another thread", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 7, 151*ms)}, []int{1, 1}},
		{"another process", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), attemptEv(2, 7, 101*ms, decode.Connect, "127.0.0.1:8080")}, []int{1, 1}},
		// Two dials at once on two threads: each numbers its own; a try on
		// a third thread could continue either: 1, never a guess.
		{"two open attempts: each thread numbers its own", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 8, 100*ms+10e3), threadEv(1, 7, 100*ms+20e3),
				threadEv(2, 8, 100*ms+40e3)}, []int{1, 1, 2, 2}},
		{"two open attempts: a third thread's try on the last fd is not guessed", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 8, 100*ms+10e3), threadEv(2, 8, 100*ms+20e3),
				threadEv(3, 8, 100*ms+30e3)}, []int{1, 1, 2, 1}},
		{"the guess is over a window after the rival", goRule,
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 8, 101*ms), threadEv(3, 9, 200*ms), threadEv(4, 9, 201*ms)}, []int{1, 1, 1, 2}},
		{"a C program's threads are their own attempts", RetryRule{WindowNs: RetryWindowNs, Max: 3},
			[]*decode.Event{threadEv(1, 7, 100*ms), threadEv(2, 7, 101*ms), threadEv(3, 7, 102*ms)}, []int{1, 1, 1}},
	} {
		var a Attempts
		var got []int
		for _, ev := range tc.evs {
			got = append(got, a.Mark(ev, tc.rule))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: attempts %v, want %v", tc.name, got, tc.want)
		}
	}
}
