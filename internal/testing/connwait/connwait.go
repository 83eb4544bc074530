// Package connwait waits for the outcome of a non-blocking connect(): the
// tests that make a connect time out, be refused or be reset after it
// returned EINPROGRESS read its end here, the one way.
package connwait

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Outcome waits until fd's non-blocking connect has ended, at most d, and
// returns how: nil (connected), the connect's errno as a unix.Errno (its
// SO_ERROR: ECONNREFUSED, ETIMEDOUT, ...), or an error when d passed with
// no outcome or the wait itself failed. A poll that a signal interrupts
// (EINTR: the Go runtime preempts goroutines with one; seen in a guest
// beside two busy loops) is polled again for what is left of d, never taken
// for the end.
func Outcome(fd int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("no outcome of the connect within %v", d)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(min(left, time.Second)/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return fmt.Errorf("SO_ERROR: %w", err)
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}
