package pipeline

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/decode"
)

// kernelKeys stands in for the tracer's rate limit maps.
type kernelKeys struct {
	total, created uint64
	counts         map[uint64]uint64
	entries        int
}

func (k *kernelKeys) LimitCounts() (uint64, uint64, error) { return k.total, k.created, nil }
func (k *kernelKeys) LimitKeysMax() int                    { return 16384 }
func (k *kernelKeys) LimitStates(fn func(id, s uint64)) (int, error) {
	for id, s := range k.counts {
		fn(id, s)
	}
	return k.entries, nil
}

func limited(id uint64) *decode.Event {
	return &decode.Event{Limited: true, LimitID: id}
}

// Each failure the kernel held back is counted once, when read, where its
// key's events go; a key's next written event carries what was read since
// its previous one; a count waits for its key's first event; what no event
// accounts for is unattributed, known at the final read.
func TestLimitBook(t *testing.T) {
	b := newLimitBook(true)
	k := &kernelKeys{}
	series := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	now := time.Unix(1000, 0)
	step := func(total, created uint64, entries int, counts map[uint64]uint64) {
		t.Helper()
		k.total, k.created, k.entries, k.counts = total, created, entries, counts
		now = now.Add(time.Second)
		if err := b.read(k, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.event(limited(1), fateWritten, series); n != 0 {
		t.Fatalf("a new key's first event carries %d", n)
	}
	b.event(limited(2), fateFiltered, nil)
	// Key 3's first event has not been seen: its 5 wait.
	step(22, 3, 3, map[uint64]uint64{1: 10, 2: 7, 3: 5})
	if b.suppressed != 10 || b.filtered != 7 || value(series) != 10 || b.held() != 10 {
		t.Fatalf("after a read: suppressed %d filtered %d series %v held %d, want 10 7 10 10", b.suppressed, b.filtered, value(series), b.held())
	}
	if n := b.event(limited(1), fateWritten, series); n != 10 {
		t.Errorf("the next event of key 1 carries %d, want 10 (all read since its previous event)", n)
	}
	if n := b.event(limited(1), fateWritten, series); n != 0 {
		t.Errorf("an event right after carries %d, want 0", n)
	}
	b.event(limited(3), fateWritten, series)
	step(30, 4, 3, map[uint64]uint64{1: 15, 2: 7, 3: 5}) // key 4 made and evicted unread: 3 of the 30
	if b.suppressed != 20 || value(series) != 20 {
		t.Errorf("suppressed %d, series %v, want 20: each count once", b.suppressed, value(series))
	}
	if b.unattributed() != 0 || b.evicted() != 1 {
		t.Errorf("unattributed %d before the final read, evicted %d; want 0 1", b.unattributed(), b.evicted())
	}
	// A short read (a CPU moving key 1's count from its slot to the map
	// between the two reads) counts nothing, nor does the full count after.
	step(32, 4, 3, map[uint64]uint64{1: 12, 2: 7, 3: 5})
	step(32, 4, 3, map[uint64]uint64{1: 15, 2: 7, 3: 5})
	if b.suppressed != 20 || value(series) != 20 {
		t.Errorf("after a short read: suppressed %d, series %v, want 20: counted twice", b.suppressed, value(series))
	}
	// Keys forgotten only when the kernel has no count and no event came.
	for range 5 {
		step(32, 4, 1, map[uint64]uint64{1: 15})
	}
	if b.keys[2] == nil {
		t.Errorf("key 2 forgotten within %v of its last sight", limitForget)
	}
	step(32, 4, 1, map[uint64]uint64{1: 15})
	if b.keys[2] != nil || b.keys[1] == nil {
		t.Errorf("keys kept %v: want 1 only, %v after key 2 was last seen", b.keys, limitForget)
	}
	b.final = true
	step(33, 4, 1, map[uint64]uint64{1: 15})
	if b.unattributed() != 33-20-7 || b.held() != 26 {
		t.Errorf("final: unattributed %d held %d, want 6 26", b.unattributed(), b.held())
	}
	if n := b.event(&decode.Event{LimitID: 1}, fateWritten, series); n != 0 {
		t.Errorf("an event not Limited carried %d", n)
	}
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
