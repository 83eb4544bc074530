package pipeline

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/eaddr/eaddr/decode"
)

// rateLimiter lets through at most rate events per second per (netns,
// syscall, errno, address): a storm of identical failures becomes a trickle
// of events, each carrying how many it stands for. Not safe for concurrent
// use; allocation-free once a key is known.
type rateLimiter struct {
	rate  float64 // events per second; <= 0: no limit
	burst float64
	keys  map[rlKey]*bucket
	max   int
	total uint64 // suppressed since start
}

type rlKey struct {
	netns uint32
	sys   decode.Syscall
	errno int
	addr  netip.AddrPort
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed uint64 // since the last event that passed
}

func newRateLimiter(rate float64) *rateLimiter {
	return &rateLimiter{rate: rate, burst: max(rate, 1), keys: map[rlKey]*bucket{}, max: 65536}
}

// allow reports whether ev passes; if it does, suppressed is how many events
// of its key were held back since the previous one that passed.
func (r *rateLimiter) allow(ev *decode.Event, now time.Time) (ok bool, suppressed uint64) {
	if r.rate <= 0 {
		return true, 0
	}
	k := rlKey{netns: ev.NetNS, sys: ev.Syscall, errno: ev.Errno}
	if ev.Syscall == decode.Bind || ev.NodePort {
		k.addr = ev.Local.IP
	} else {
		k.addr = ev.Remote.IP
	}
	b := r.keys[k]
	if b == nil {
		if len(r.keys) >= r.max {
			clear(r.keys) // forget the oldest storms rather than grow
		}
		b = &bucket{tokens: r.burst, last: now}
		r.keys[k] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		r.total++
		return false, 0
	}
	b.tokens--
	s := b.suppressed
	b.suppressed = 0
	return true, s
}

// ParseRate reads "100/s", "100", "0" or "off".
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a rate such as 100/s (0 or off: no limit)", s)
	}
	return n, nil
}
