package pipeline

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/tracer"
)

// kernelKeys stands in for the tracer's rate limit maps.
type kernelKeys struct {
	total, created uint64
	counts         map[uint64]uint64
	entries        int
	groupTotal     uint64
	groups         map[tracer.CgroupLimitKey]uint64
}

func (k *kernelKeys) LimitCounts() (uint64, uint64, error) { return k.total, k.created, nil }
func (k *kernelKeys) LimitKeysMax() int                    { return 16384 }
func (k *kernelKeys) LimitStates(fn func(id, s uint64)) (int, error) {
	for id, s := range k.counts {
		fn(id, s)
	}
	return k.entries, nil
}

func (k *kernelKeys) CgroupLimitStates(fn func(tracer.CgroupLimitKey, uint64)) (uint64, error) {
	for g, n := range k.groups {
		fn(g, n)
	}
	return k.groupTotal, nil
}

func limited(id uint64) *decode.Event {
	return &decode.Event{Limited: true, LimitID: id}
}

// Each failure the kernel held back is counted once, when read, where its
// key's events go; a key's next written event carries what was read since
// its previous one; a count waits for its key's first event; what no event
// accounts for is unattributed, known at the final read.
func TestLimitBook(t *testing.T) {
	b := newLimitBook(true, false)
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

// What a cgroup's bucket held back is counted where that cgroup's latest
// event of the bucket's syscall and errno went, in its pod's series, in no
// event's suppressed, and apart (heldByCgroup); what no event of the
// bucket accounts for is unattributed at the final read, in heldByCgroup
// too.
func TestLimitBookCgroups(t *testing.T) {
	b := newLimitBook(true, true)
	k := &kernelKeys{}
	pod := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	now := time.Unix(1000, 0)
	step := func(keyTotal, groupTotal uint64, keys map[uint64]uint64, groups map[tracer.CgroupLimitKey]uint64) {
		t.Helper()
		k.total, k.created, k.entries, k.counts = keyTotal, 2, 2, keys
		k.groupTotal, k.groups = groupTotal, groups
		now = now.Add(time.Second)
		if err := b.read(k, now); err != nil {
			t.Fatal(err)
		}
	}
	ev := func(id, cgroup uint64) *decode.Event {
		return &decode.Event{Limited: true, LimitID: id, CgroupID: cgroup, Syscall: decode.Bind, Errno: 99}
	}
	flood := tracer.CgroupLimitKey{CgroupId: 7, Err: 99, Syscall: tracer.SysBind}
	filtered := tracer.CgroupLimitKey{CgroupId: 8, Err: 99, Syscall: tracer.SysBind}
	b.event(ev(1, 7), fateWritten, pod)
	b.event(ev(2, 8), fateFiltered, nil)
	// The flood's bucket held back 100, key 1 held back 3; cgroup 8's
	// bucket 5 (filtered); a bucket no event named 4.
	unseen := tracer.CgroupLimitKey{CgroupId: 9, Err: 99, Syscall: tracer.SysBind}
	step(3, 109, map[uint64]uint64{1: 3}, map[tracer.CgroupLimitKey]uint64{flood: 100, filtered: 5, unseen: 4})
	if b.suppressed != 103 || b.filtered != 5 || value(pod) != 103 || b.heldByCgroup() != 100 || b.held() != 103 || b.total != 112 {
		t.Errorf("suppressed %d filtered %d series %v by cgroup %d held %d total %d; want 103 5 103 100 103 112",
			b.suppressed, b.filtered, value(pod), b.heldByCgroup(), b.held(), b.total)
	}
	if n := b.event(ev(1, 7), fateWritten, pod); n != 3 {
		t.Errorf("key 1's next event carries %d, want its own 3 (the cgroup's 100 are other keys')", n)
	}
	if b.byCgroup.Load() != 100 {
		t.Errorf("the metric reads %d, want 100", b.byCgroup.Load())
	}
	b.final = true
	step(3, 109, map[uint64]uint64{1: 3}, map[tracer.CgroupLimitKey]uint64{flood: 100, filtered: 5, unseen: 4})
	if b.unattributed() != 4 || b.heldByCgroup() != 104 || b.held() != 107 {
		t.Errorf("final: unattributed %d by cgroup %d held %d; want 4 104 107", b.unattributed(), b.heldByCgroup(), b.held())
	}
}
