package pipeline

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/tracer"
)

// kernelKeys stands in for the tracer's rate limit maps.
type kernelKeys struct {
	total, created uint64
	keys           map[uint64]uint64
}

func (k *kernelKeys) LimitCounts() (uint64, uint64, error) { return k.total, k.created, nil }
func (k *kernelKeys) LimitKeysMax() int                    { return 16384 }
func (k *kernelKeys) LimitStates(fn func(id, s uint64)) (int, error) {
	for id, s := range k.keys {
		fn(id, s)
	}
	return len(k.keys), nil
}

func limited(id, total uint64) *tracer.RawEvent {
	return &tracer.RawEvent{Flags: tracer.FlagLimited, LimitId: id, LimitSuppressed: total}
}

// Each failure the kernel held back is counted once, by an event of its key
// or by a read, whichever comes first; it goes where its key's events go;
// what no event accounts for is unattributed; an event carries what was
// held back since its key's previous event.
func TestLimitBook(t *testing.T) {
	b := newLimitBook(true)
	k := &kernelKeys{keys: map[uint64]uint64{}}
	series := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	now := time.Unix(1000, 0)
	step := func(total, created uint64, keys map[uint64]uint64) {
		t.Helper()
		k.total, k.created, k.keys = total, created, keys
		now = now.Add(time.Second)
		if err := b.read(k, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.event(limited(1, 0), fateWritten, series); n != 0 {
		t.Fatalf("a new key's first event carries %d", n)
	}
	b.event(limited(2, 0), fateFiltered, nil)
	step(17, 3, map[uint64]uint64{1: 10, 2: 7}) // key 3 was created and evicted unseen
	if b.suppressed != 10 || b.filtered != 7 || value(series) != 10 {
		t.Fatalf("after a read: suppressed %d filtered %d series %v, want 10 7 10", b.suppressed, b.filtered, value(series))
	}
	if n := b.event(limited(1, 15), fateWritten, series); n != 15 {
		t.Errorf("the next event of key 1 carries %d, want 15 (all since its previous event)", n)
	}
	if n := b.event(limited(1, 15), fateWritten, series); n != 0 {
		t.Errorf("an event right after carries %d, want 0", n)
	}
	step(30, 3, map[uint64]uint64{1: 15, 2: 7})
	if b.suppressed != 15 || value(series) != 15 {
		t.Errorf("counted twice: suppressed %d, series %v, want 15", b.suppressed, value(series))
	}
	if b.unattributed() != 8 || b.held() != 23 || b.evicted() != 1 {
		t.Errorf("unattributed %d held %d evicted %d, want 8 23 1", b.unattributed(), b.held(), b.evicted())
	}
	// Key 2 evicted from the kernel: remembered while an event may still
	// come, forgotten after.
	for range 5 {
		step(30, 3, map[uint64]uint64{1: 15})
	}
	if b.keys[2] == nil {
		t.Errorf("key 2 forgotten within %v of its last sight", limitForget)
	}
	step(30, 3, map[uint64]uint64{1: 15})
	if b.keys[2] != nil || b.keys[1] == nil {
		t.Errorf("keys kept %v: want 1 only, %v after key 2 was last seen", b.keys, limitForget)
	}
	if n := b.event(&tracer.RawEvent{LimitId: 1, LimitSuppressed: 99}, fateWritten, series); n != 0 || b.suppressed != 15 {
		t.Errorf("an event without FlagLimited counted: carried %d, suppressed %d", n, b.suppressed)
	}
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
