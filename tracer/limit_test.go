//go:build linux

package tracer

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// failBindTo fails bind() with EADDRNOTAVAIL on addr, an address no
// interface has. No packet is sent.
func failBindTo(t *testing.T, addr [4]byte) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 4242, Addr: addr}); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("bind to %v: %v, want EADDRNOTAVAIL", addr, err)
	}
}

// readAll reads until the ring has been empty for a moment.
func readAll(t *testing.T, tr *Tracer) []RawEvent {
	t.Helper()
	var evs []RawEvent
	for {
		ev, err := readOne(t, tr, 200*time.Millisecond)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

// The rate limit works in the kernel, before the ring: 2,000 identical
// failures into a ring of one page (ten events) at 5/s lose nothing. Five
// pass (the burst), the kernel counts the rest, exactly, under one key
// whose id the events carry; another address has its own budget.
func TestRateLimitInKernel(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Rate: 5, RingSize: os.Getpagesize()})
	const n = 2000
	start := time.Now()
	for range n {
		failBindTo(t, [4]byte{198, 18, 0, 1})
	}
	took := time.Since(start)
	failBindTo(t, [4]byte{198, 18, 0, 2}) // another key: passes whatever the first one's budget
	evs := readAll(t, tr)
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	suppressed, keys, err := tr.LimitCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failures in %v at 5/s into a %d-byte ring: %d events, %d lost, %d suppressed, %d keys", n, took, os.Getpagesize(), len(evs), st.KernelLost, suppressed, keys)
	if st.KernelLost != 0 {
		t.Errorf("%d events lost: the ring was reserved before the rate limit decided", st.KernelLost)
	}
	if uint64(len(evs))+suppressed != n+1 {
		t.Errorf("%d events + %d suppressed != %d failures", len(evs), suppressed, n+1)
	}
	if max := 5 + int(took.Seconds()*5) + 1 + 1; len(evs) > max || len(evs) < 6 {
		t.Errorf("%d events passed, want 6 to %d (a burst of 5 for the first key in %v, and the second key's one)", len(evs), max, took)
	}
	if keys != 2 {
		t.Errorf("%d keys created, want 2 (one per address)", keys)
	}
	states := map[uint64]uint64{}
	kept, err := tr.LimitStates(func(id, s uint64) { states[id] = s })
	if err != nil {
		t.Fatal(err)
	}
	first, last := evs[0], evs[len(evs)-1]
	for _, ev := range evs {
		if ev.Flags&FlagLimited == 0 {
			t.Fatalf("an event without FlagLimited: %+v", ev)
		}
	}
	if first.LimitId == last.LimitId {
		t.Errorf("both addresses share key %d", first.LimitId)
	}
	if states[first.LimitId] != suppressed || len(states) != 1 || kept != 2 {
		t.Errorf("kernel counts %v of %d keys, want %d suppressed under the first event's id %d only, of 2 keys", states, kept, suppressed, first.LimitId)
	}
}

// Off, the limit is not there: every failure is an event, and no event
// claims a key.
func TestRateLimitOff(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid())})
	for range 50 {
		failBindTo(t, [4]byte{198, 18, 0, 1})
	}
	evs := readAll(t, tr)
	suppressed, keys, err := tr.LimitCounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 50 || suppressed != 0 || keys != 0 {
		t.Errorf("%d events, %d suppressed, %d keys: want 50, 0, 0", len(evs), suppressed, keys)
	}
	for _, ev := range evs {
		if ev.Flags&FlagLimited != 0 || ev.LimitId != 0 {
			t.Fatalf("event with the limit off claims key %d (flags %#x)", ev.LimitId, ev.Flags)
		}
	}
}

// More keys than the kernel keeps: the LRU evicts, the creation counter
// says how many, and the per-CPU total still counts every failure held
// back, also those whose key's count was evicted.
func TestRateLimitKeysEvicted(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Rate: 1, RingSize: 16 << 20})
	n := tr.LimitKeysMax() + 1000
	for i := range n { // 198.18.0.0/15 (RFC 2544): on no interface
		a := [4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)}
		failBindTo(t, a)
		failBindTo(t, a) // the same key within its second: held back
	}
	suppressed, keys, err := tr.LimitCounts()
	if err != nil {
		t.Fatal(err)
	}
	var inKeys uint64
	entries, err := tr.LimitStates(func(id, s uint64) { inKeys += s })
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, tr)
	t.Logf("%d addresses twice at 1/s: %d events, %d suppressed, %d keys created, %d kept (max %d), %d suppressed in kept keys", n, len(evs), suppressed, keys, entries, tr.LimitKeysMax(), inKeys)
	if keys != uint64(n) || suppressed != uint64(n) || len(evs) != n {
		t.Errorf("keys %d, suppressed %d, events %d: want %d each", keys, suppressed, len(evs), n)
	}
	if entries > tr.LimitKeysMax() || keys-uint64(entries) < 1000 {
		t.Errorf("%d keys kept of %d created (max %d): want at least 1000 evicted", entries, keys, tr.LimitKeysMax())
	}
	if inKeys >= suppressed {
		t.Errorf("the kept keys hold %d of %d suppressed: eviction lost nothing, so the test proves nothing", inKeys, suppressed)
	}
}
