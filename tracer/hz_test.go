//go:build linux

package tracer

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func TestChooseHZ(t *testing.T) {
	for _, c := range []struct {
		dj   uint32
		dt   time.Duration
		want int // 0: no answer
	}{
		{30, 120 * time.Millisecond, 250},
		{36, 120 * time.Millisecond, 300},
		{12, 120 * time.Millisecond, 100},
		{120, 120 * time.Millisecond, 1000},
		{28, 120 * time.Millisecond, 250},   // two behind
		{38, 120 * time.Millisecond, 300},   // two ahead
		{33, 120 * time.Millisecond, 0},     // between 250 and 300: neither for sure
		{24, 120 * time.Millisecond, 0},     // HZ 200: no choice of x86 or arm64
		{640, 600 * time.Millisecond, 0},    // 6.7% off 1000: nothing fits
		{590, 600 * time.Millisecond, 1000}, // ten ticks behind in the long window
		{485, 2 * time.Second, 250},         // 15 ticks behind, in the longest window
		{535, 2 * time.Second, 0},           // between 250 and 300, even there
		{3, 10 * time.Millisecond, 0},       // too short to tell 250 from 300
		{30, 0, 0},                          // no time gone: nothing fits
		{150, 600 * time.Millisecond, 250},  // the long window
	} {
		hz, err := chooseHZ(c.dj, c.dt)
		if hz != c.want || (err == nil) != (c.want != 0) {
			t.Errorf("chooseHZ(%d, %v) = %d, %v; want %d", c.dj, c.dt, hz, err, c.want)
		}
	}
	if got := tickOf(300); got != 3333333 {
		t.Errorf("tickOf(300) = %d, want 3333333 (TICK_NSEC)", got)
	}
}

// The probe measures this kernel's HZ; where the kernel's config says what
// it was built with, they agree.
func TestJiffyProbe(t *testing.T) {
	testenv.RequireRoot(t)
	p, err := startJiffyProbe()
	if err != nil {
		t.Fatal(err)
	}
	tick, err := p.tickNs()
	if err != nil {
		t.Fatalf("HZ not measured: %v", err)
	}
	t.Logf("measured: %d ns per jiffy (HZ %d)", tick, uint64(time.Second)/tick)
	hz, where := configHZ(t)
	if hz == 0 {
		t.Logf("no kernel config to compare with: %s", where)
		return
	}
	if tick != tickOf(hz) {
		t.Errorf("measured %d ns per jiffy; %s says CONFIG_HZ=%d (%d ns)", tick, where, hz, tickOf(hz))
	}
}

// configHZ is CONFIG_HZ from /proc/config.gz or /boot/config-$(uname -r).
func configHZ(t *testing.T) (int, string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	boot := "/boot/config-" + unix.ByteSliceToString(u.Release[:])
	for _, path := range []string{"/proc/config.gz", boot} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		defer f.Close()
		var r io.Reader = f
		if strings.HasSuffix(path, ".gz") {
			if r, err = gzip.NewReader(f); err != nil {
				t.Fatal(err)
			}
		}
		s := bufio.NewScanner(r)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "CONFIG_HZ="); ok {
				hz, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("%s: CONFIG_HZ=%q", path, v)
				}
				return hz, path
			}
		}
		return 0, path + " has no CONFIG_HZ"
	}
	return 0, "neither /proc/config.gz nor " + boot + " is readable"
}
