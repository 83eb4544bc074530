package portmodel

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// KernelClock reads the clocks tcp_twsk_unique compares a TIME_WAIT's
// stamps with, for Sysctls.NowSec and NowMS. The seconds are
// ktime_get_seconds(): the timekeeper's seconds as of its last tick, which
// is CLOCK_MONOTONIC_COARSE, not CLOCK_MONOTONIC (that one runs ahead of it
// by up to a tick, more on a loaded virtual machine whose ticks come late:
// a model told the finer clock sees a second pass that the kernel has not
// seen yet). The ms are tcp_clock_ms() (ktime_get_ns: CLOCK_MONOTONIC), the
// clock of tcp_tw_reuse_delay (6.13+). Both are read by the kernel no
// earlier than here, so the kernel's later judgement is never behind them.
func KernelClock() (sec, ms int64, err error) {
	var coarse, fine unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &coarse); err != nil {
		return 0, 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC_COARSE): %w", err)
	}
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &fine); err != nil {
		return 0, 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return coarse.Sec, fine.Nano() / 1e6, nil
}
