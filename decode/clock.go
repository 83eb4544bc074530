package decode

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// BootClock converts CLOCK_BOOTTIME nanoseconds (bpf_ktime_get_boot_ns) to
// wall-clock time. The offset between the two clocks is measured when the
// clock is made and again every RefreshEvery, so an NTP step is followed
// within that time.
type BootClock struct {
	mu           sync.Mutex
	offset       int64 // realtime - boottime, ns
	uncertainty  int64 // the offset is right within this many ns: half the tightest sandwich
	measured     time.Time
	RefreshEvery time.Duration
}

// NewBootClock measures the offset now.
func NewBootClock() *BootClock {
	c := &BootClock{RefreshEvery: 10 * time.Second}
	c.measure()
	return c
}

func (c *BootClock) measure() {
	// Sandwich the boottime read between two realtime reads and keep the
	// tightest of a few tries: the offset is then good to a microsecond.
	best := int64(-1)
	for range 3 {
		var r1, b, r2 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r1)
		_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &b)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r2)
		gap := r2.Nano() - r1.Nano()
		if best < 0 || gap < best {
			best = gap
			c.offset = r1.Nano() + gap/2 - b.Nano()
			c.uncertainty = gap/2 + 1
		}
	}
	c.measured = time.Now()
}

// Wall returns the UTC wall-clock time of a boot-time timestamp.
func (c *BootClock) Wall(bootNs uint64) time.Time {
	c.mu.Lock()
	if time.Since(c.measured) > c.RefreshEvery {
		c.measure()
	}
	off := c.offset
	c.mu.Unlock()
	return time.Unix(0, int64(bootNs)+off).UTC()
}
