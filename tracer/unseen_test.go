package tracer

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/connwait"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A pending connect whose end neither async program saw (on this VM's
// kernel they are not run in a softirq over its agent's threads: about 1
// timed-out connect in 200 to 600 here, and nothing counted it) is still
// reported: when its program reads the error with SO_ERROR, with that
// error; else when its socket is destroyed, if the socket still holds the
// error; else (the error read by recv) it is counted as unseen
// (Stats.AsyncUnseen). Two tracers watch the same three timed-out
// connects: one whole, which reports all three and counts nothing unseen,
// and one without async_state and async_error, as that kernel ran them.
func TestAsyncUnseenCounted(t *testing.T) {
	opts := Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.ETIMEDOUT)}, Async: true}
	whole := newTracer(t, opts)
	blind := newTracer(t, opts)
	detach(t, blind, blind.objs.AsyncState)
	detach(t, blind, blind.objs.AsyncError)
	if err := testns.New(t).Do(func() error { return timeOutThree(t) }); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tr             *Tracer
		events, unseen int
	}{"whole": {whole, 3, 0}, "without async_state and async_error": {blind, 2, 1}} {
		for i := range tc.events {
			ev := expect(t, tc.tr, name+": a timed-out connect", SysConnect, unix.ETIMEDOUT)
			if ev.Flags&FlagAsync == 0 {
				t.Errorf("%s: event %d flags %#x: not async", name, i, ev.Flags)
			}
		}
		if ev, err := readOne(t, tc.tr, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: one event more than %d: %s flags %#x (%v)", name, tc.events, unix.ErrnoName(unix.Errno(ev.Err)), ev.Flags, err)
		}
		st, err := tc.tr.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.AsyncUnseen != uint64(tc.unseen) || st.RunsSkippedTotal() != 0 {
			t.Errorf("%s: AsyncUnseen %d, runs skipped %d; want %d and 0", name, st.AsyncUnseen, st.RunsSkippedTotal(), tc.unseen)
		}
	}
}

// timeOutThree makes three non-blocking connects time out (the kernel gives
// up after about 3 s, TCP_SYNCNT 1): a full accept queue (fullListener)
// drops their SYNs. The first one's error is read with SO_ERROR, the
// second's not at all (its end waited for in TCP_INFO's state), the
// third's with recv; then all are closed: their sockets are destroyed.
func timeOutThree(t *testing.T) error {
	t.Helper()
	_, addr := fullListener(t)
	fds := [3]int{-1, -1, -1}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	for i := range fds {
		var err error
		if fds[i], err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fds[i], unix.IPPROTO_TCP, unix.TCP_SYNCNT, 1); err != nil {
			return err
		}
		if err := unix.Connect(fds[i], addr); !errors.Is(err, unix.EINPROGRESS) {
			t.Fatalf("connect %d: %v, want EINPROGRESS (its SYN dropped)", i, err)
		}
	}
	if err := connwait.Outcome(fds[0], 20*time.Second); !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("first connect's outcome: %v, want ETIMEDOUT", err)
	}
	for _, fd := range fds[1:] {
		for deadline := time.Now().Add(20 * time.Second); tcpState(t, fd) != tcpClose; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("connect still in state %d after 20 s", tcpState(t, fd))
			}
		}
	}
	if _, err := unix.Read(fds[2], make([]byte, 1)); !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("third connect's read: %v, want ETIMEDOUT", err)
	}
	for i, fd := range fds {
		fds[i] = -1
		if err := unix.Close(fd); err != nil {
			return err
		}
	}
	return nil
}
