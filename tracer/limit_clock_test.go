//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The limit on the jiffies clock keeps time (issue 24, item 6). One key
// fails without pause at 10/s (a burst of 10) for 1.5 s: GCRA passes the
// burst at once and then failure n (n >= 10) once n-9 intervals of 100 ms
// have gone since the first. The events' own timestamps (boot_ns, the fine
// clock) are the judge: no event earlier than its turn less one interval
// (the configured count plus one at most, at every moment) and one tick
// (jiffies, which the limit reads, lag the fine clock by up to a tick: at
// the first event a lagging jiffy makes the limit's elapsed time up to a
// tick longer than the fine clock's; seen on arm64 under TCG, HZ 250: event
// 14 at 3.99 intervals, its bound 4), and the last one
// no later than its turn plus one (minus one at least). With the tick
// doubled or halved (a wrong HZ), the limit's time runs twice as fast or half
// as fast, and the same check must fail. With the tick at 0, the fallback
// when HZ is not told for sure, the limit is on bpf_ktime_get_boot_ns and
// the schedule holds. A pause of the failing loop (a busy node preempts it)
// makes the events after it late by as much, through no fault of the limit:
// the last event may be late by the longest pause too, and the case with a
// pause forced just before the loop's end checks exactly that.
func TestRateLimitCoarseClock(t *testing.T) {
	for _, c := range []struct {
		name     string
		num, den uint64 // the tick is set to measured × num / den
		holds    bool
		pause    time.Duration // forced once, 150 ms before the loop's end
	}{{"measured HZ", 1, 1, true, 0}, {"tick doubled", 2, 1, false, 0}, {"tick halved", 1, 2, false, 0},
		{"fine clock", 0, 1, true, 0}, // tick 0: what New leaves when HZ is not told for sure
		{"measured HZ, paused at the end", 1, 1, true, 250 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracer(t, Options{PID: uint32(os.Getpid()), Rate: 10, RingSize: 1 << 20})
			if tr.limitTick == 0 {
				t.Fatal("the limit kept the fine clock on this kernel: HZ was not measured (see the log of New)")
			}
			if err := tr.objs.LimitTickNs.Set(tr.limitTick * c.num / c.den); err != nil {
				t.Fatal(err)
			}
			err := limitSchedule(t, tr, c.pause, time.Duration(tr.limitTick*c.num/c.den))
			switch {
			case c.holds && err != nil:
				t.Error(err)
			case !c.holds && err == nil:
				t.Error("the schedule held with a wrong tick: the check cannot tell a wrong HZ")
			case !c.holds:
				t.Logf("as it must: %v", err)
			}
		})
	}
}

// limitSchedule fails bind() on one key for 1.5 s at the limit of 10/s and
// checks the events' times against GCRA's schedule. A pause of the loop
// longer than 400 ms (the bucket holds 900 ms) would forfeit budget through
// no fault of the limit: the run is made again on a fresh key, three times
// at most. pause: one forced before the loop's end; tick: the limit's
// clock's, which an event may come early by beside the interval.
func limitSchedule(t *testing.T, tr *Tracer, pause, tick time.Duration) error {
	const burst, interval = 10, 100 * time.Millisecond
	for try := range 3 {
		gap, err := failFor(byte(10+try), 1500*time.Millisecond, pause)
		if err != nil {
			t.Fatal(err)
		}
		evs := readAll(t, tr)
		if gap > 400*time.Millisecond {
			t.Logf("the loop paused for %v: once more on a fresh key", gap)
			continue
		}
		if len(evs) < burst+5 {
			return fmt.Errorf("%d events in 1.5 s at 10/s: want the burst of %d and more", len(evs), burst)
		}
		t0 := evs[0].BootNs
		for n := burst; n < len(evs); n++ {
			turn := float64(n - burst + 1)
			at := float64(evs[n].BootNs-t0) / float64(interval)
			if at < turn-1-float64(tick)/float64(interval) {
				return fmt.Errorf("event %d came %.3f intervals after the first, its turn is at %.0f (less one interval and one tick of %v): the limit let %d through by then", n, at, turn, tick, n+1)
			}
			if late := turn + 1 + float64(gap)/float64(interval); n == len(evs)-1 && at > late {
				return fmt.Errorf("the last event, %d, came %.2f intervals after the first, its turn was at %.0f (%.2f with the loop's longest pause, %v): the limit held back what it should have let through", n, at, turn, late, gap)
			}
		}
		t.Logf("%d events in %.2f intervals: the schedule held", len(evs), float64(evs[len(evs)-1].BootNs-t0)/float64(interval))
		return nil
	}
	t.Fatal("the failing loop paused for more than 400 ms in each of three runs: too loaded to tell")
	return nil
}

// failFor fails bind() to 198.18.0.last without pause for d (but the one
// pause it is given, 150 ms before the end), and returns the longest pause
// between two failures.
func failFor(last byte, d, pause time.Duration) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Port: 4242, Addr: [4]byte{198, 18, 0, last}}
	var gap time.Duration
	start := time.Now()
	for prev := start; prev.Sub(start) < d; {
		if pause > 0 && prev.Sub(start) >= d-150*time.Millisecond {
			time.Sleep(pause)
			pause = 0
		}
		if err := unix.Bind(fd, sa); !errors.Is(err, unix.EADDRNOTAVAIL) {
			return 0, fmt.Errorf("bind to %v: %v, want EADDRNOTAVAIL", sa.Addr, err)
		}
		now := time.Now()
		gap, prev = max(gap, now.Sub(prev)), now
	}
	return gap, nil
}
