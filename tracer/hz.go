package tracer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The rate limit's clock (bpf/eaddr.bpf.c limit_tick_ns): jiffies times the
// length of a jiffy, so that a suppressed failure reads one word instead of
// calling bpf_ktime_get_boot_ns. The kernel's HZ is in no file a container
// can count on (/boot and /proc/config.gz are often missing), so it is
// measured: a tiny socket filter returns jiffies through BPF_PROG_TEST_RUN,
// once before eaddr's programs load and once after, and the jiffies that
// passed are compared with CLOCK_MONOTONIC, which jiffies follow (the tick
// advances them by the monotonic time gone, a tick at a time). Only the
// Kconfig choices of x86 and arm64 are accepted, and only one that fits the
// count within two jiffies or 4% (a late tick at either end, on a loaded
// node or a starved VM, makes jiffies lag) and no other does: the choices
// are at least 20% apart, so two never fit at once. When the first window
// fits none, a longer one is waited for, then one longer still; if none
// fits, the limit keeps the fine clock (correct, slower) and the log says
// why.

// hzChoices are CONFIG_HZ's values on x86 and arm64.
var hzChoices = []int{100, 250, 300, 1000}

const (
	hzSlack = 2    // jiffies the count may be off by, at the least: a tick's lag at either end
	hzShare = 0.04 // the share of the count it may be off by, when more
)

// hzWindows are the times waited for, one after the other, until a choice
// fits: in the first, 250 and 300 differ by 6 jiffies, more than twice
// hzSlack; the longer ones tolerate ticks later by tens of ms.
var hzWindows = []time.Duration{120 * time.Millisecond, 600 * time.Millisecond, 2 * time.Second}

// jiffyProbe reads jiffies from user space.
type jiffyProbe struct {
	prog  *ebpf.Program
	j0    uint32
	t0    time.Time
	sleep func(time.Duration) // time.Sleep; tests wait otherwise
}

// startJiffyProbe loads the probe and takes the first sample.
func startJiffyProbe() (*jiffyProbe, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "eaddr_jiffies",
		Type:    ebpf.SocketFilter,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.FnJiffies64.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("loading the jiffies probe: %w", err)
	}
	p := &jiffyProbe{prog: prog, sleep: time.Sleep}
	if p.j0, p.t0, err = p.sample(); err != nil {
		prog.Close()
		return nil, err
	}
	return p, nil
}

// sample is jiffies (their low 32 bits) and when they were read, to within
// 1 ms of CLOCK_MONOTONIC (the run is retried when it took longer).
func (p *jiffyProbe) sample() (uint32, time.Time, error) {
	data := make([]byte, 14) // a socket filter's test run wants an Ethernet header
	for range 20 {
		t0 := time.Now()
		j, err := p.prog.Run(&ebpf.RunOptions{Data: data})
		t1 := time.Now()
		if err != nil {
			return 0, t0, fmt.Errorf("running the jiffies probe: %w", err)
		}
		if d := t1.Sub(t0); d <= time.Millisecond {
			return j, t0.Add(d / 2), nil
		}
	}
	return 0, time.Time{}, errors.New("the jiffies probe took more than 1 ms 20 times")
}

// tickNs is the length of a jiffy in ns, measured from the first sample: at
// least hzWindows[0] after it, and each longer window while none fits.
// An error says why it could not be told; the probe is closed either way.
func (p *jiffyProbe) tickNs() (uint64, error) {
	defer p.prog.Close()
	var hz int
	var err error
	for _, w := range hzWindows {
		if d := w - time.Since(p.t0); d > 0 {
			p.sleep(d)
		}
		j1, t1, serr := p.sample()
		if serr != nil {
			return 0, serr
		}
		if hz, err = chooseHZ(j1-p.j0, t1.Sub(p.t0)); err == nil {
			return tickOf(hz), nil
		}
	}
	return 0, err
}

// chooseHZ is the one CONFIG_HZ choice under which dj jiffies fit dt to
// within hzSlack or hzShare of the count, whichever is more.
func chooseHZ(dj uint32, dt time.Duration) (int, error) {
	var fit []int
	for _, hz := range hzChoices {
		want := dt.Seconds() * float64(hz)
		if math.Abs(float64(dj)-want) <= max(hzSlack, hzShare*want) {
			fit = append(fit, hz)
		}
	}
	switch len(fit) {
	case 1:
		return fit[0], nil
	case 0:
		return 0, fmt.Errorf("%d jiffies in %v (%.0f/s) fit no HZ of %v", dj, dt.Round(time.Microsecond), float64(dj)/dt.Seconds(), hzChoices)
	}
	return 0, fmt.Errorf("%d jiffies in %v fit HZ %v alike", dj, dt.Round(time.Microsecond), fit)
}

// tickOf is the kernel's TICK_NSEC for hz: 1e9/hz rounded.
func tickOf(hz int) uint64 { return (uint64(time.Second) + uint64(hz)/2) / uint64(hz) }
