package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/tracer"
)

// limitBook accounts for the failures the kernel's rate limit held back
// (bpf/eaddr.h, struct limit_state). Each kernel key has an id that is never
// reused, carried by the events that pass; its per-CPU counts are read each
// tick (tracer.LimitStates). A failure is counted once, when read, where its
// key's latest event went: suppressed (and carried by the key's next
// written event), filtered, or filtered as unresolved. Counts of a key no
// event of which reached user space yet wait in the kernel; those of a key
// evicted before they were read are unattributed: in the totals, in no pod.
// With the cgroups' buckets on (--rate-limit-cgroup), what a cgroup's
// bucket held back is counted the same way by bucket (cgroup, errno,
// syscall, as its events carry them: tracer.CgroupLimitStates), where the
// cgroup's latest event of that syscall and errno went, in its pod's
// series; no event carries it (it is other keys' failures), and it is also
// counted apart (cgroup).
// Not safe for concurrent use; allocation-free once a key is known.
type limitBook struct {
	on     bool
	keys   map[uint64]*limitKey                // by kernel key id
	groups map[tracer.CgroupLimitKey]*limitKey // by cgroup bucket; nil: no such buckets
	now    time.Time                           // of the last read
	// final: the programs are detached and this is the last read, so
	// what is not attributed now never will be.
	final bool

	// Read from the kernel so far, by what became of the key's (or
	// bucket's) events: both kinds of bucket.
	suppressed, filtered, unresolved uint64
	// Of those, the cgroups' buckets': suppressed, and every fate.
	groupSuppressed, groupRead uint64

	// From the kernel at the last read.
	total, created uint64 // every failure held back (both kinds of bucket); keys made
	groupTotal     uint64 // of total, those the cgroups' buckets held back
	entries, max   int    // keys in the map, and its bound

	// byCgroup is heldByCgroup() as of the last read, for /metrics.
	byCgroup atomic.Uint64
}

type limitKey struct {
	collected uint64             // the kernel's count at the last read
	pending   uint64             // suppressed, not yet carried by an event (keys only)
	fate      limitFate          // what became of its last event
	errors    prometheus.Counter // its eaddr_errors_total series; nil: none
	seen      time.Time          // the last read before an event or read saw it
}

type limitFate uint8

const (
	fateWritten limitFate = iota
	fateFiltered
	fateUnresolved
)

// newLimitBook makes the book of a rate limit that is on or not, with
// the cgroups' buckets or not.
func newLimitBook(on, cgroups bool) *limitBook {
	b := &limitBook{on: on, keys: map[uint64]*limitKey{}}
	if on && cgroups {
		b.groups = map[tracer.CgroupLimitKey]*limitKey{}
	}
	return b
}

// event notes where an event of ev's key (and of its cgroup's bucket) went,
// and returns how many failures of that key were read as held back since
// its previous written event: the event's "suppressed".
func (b *limitBook) event(ev *decode.Event, fate limitFate, errors prometheus.Counter) uint64 {
	if b.groups != nil {
		g := tracer.CgroupLimitKey{CgroupId: ev.CgroupID, Err: uint16(ev.Errno), Syscall: uint8(ev.Syscall)}
		note(b.groups, g, fate, errors, b.now)
	}
	if !ev.Limited {
		return 0
	}
	k := note(b.keys, ev.LimitID, fate, errors, b.now)
	if fate != fateWritten {
		return 0
	}
	n := k.pending
	k.pending = 0
	return n
}

// note records in m the fate of an event of key id, at the last read now.
func note[K comparable](m map[K]*limitKey, id K, fate limitFate, errors prometheus.Counter, now time.Time) *limitKey {
	k := m[id]
	if k == nil {
		k = &limitKey{}
		m[id] = k
	}
	k.fate, k.errors, k.seen = fate, errors, now
	return k
}

// collect counts what a key held back since the last read. A count below
// the last one is a short read (a CPU moved it from its slot to the map
// between the two reads: the next read has it) or, rarely, a count the
// kernel evicted and started again; either way nothing is counted now, and
// what never comes back is unattributed at the final read. group: k is a
// cgroup's bucket, whose count no event carries.
func (b *limitBook) collect(k *limitKey, total uint64, group bool) {
	if total <= k.collected {
		return
	}
	n := total - k.collected
	k.collected = total
	if group {
		b.groupRead += n
	}
	switch k.fate {
	case fateFiltered:
		b.filtered += n
	case fateUnresolved:
		b.unresolved += n
	default:
		b.suppressed += n
		if group {
			b.groupSuppressed += n
		} else {
			k.pending += n
		}
		if k.errors != nil {
			k.errors.Add(float64(n))
		}
	}
}

// limitForget is how long a key without counts in the kernel is remembered
// after its last event: longer than any event waits in user space (holdFor,
// diagWait).
const limitForget = 5 * time.Second

// limitSource is what read needs of the tracer.
type limitSource interface {
	LimitCounts() (suppressed, keys uint64, err error)
	LimitStates(fn func(id, suppressed uint64)) (keys int, err error)
	LimitKeysMax() int
	CgroupLimitStates(fn func(k tracer.CgroupLimitKey, held uint64)) (total uint64, err error)
}

// limitEvery is how often read asks the kernel: the maps are read whole, and
// the tick may come every flush interval (50 ms).
const limitEvery = time.Second

// read collects every key's and cgroup bucket's count from the kernel, at
// most once per limitEvery unless final, then forgets those the kernel no
// longer has and no event named for limitForget.
func (b *limitBook) read(t limitSource, now time.Time) error {
	if !b.on || (!b.final && !b.now.IsZero() && now.Sub(b.now) < limitEvery) {
		return nil
	}
	b.now = now
	total, created, err := t.LimitCounts()
	if err != nil {
		return err
	}
	n, err := t.LimitStates(func(id, suppressed uint64) {
		if k := b.keys[id]; k != nil { // else no event of it was seen yet: wait
			k.seen = now
			b.collect(k, suppressed, false)
		}
	})
	if err != nil {
		return err
	}
	if b.groups != nil {
		b.groupTotal, err = t.CgroupLimitStates(func(g tracer.CgroupLimitKey, held uint64) {
			if k := b.groups[g]; k != nil {
				k.seen = now
				b.collect(k, held, true)
			}
		})
		if err != nil {
			return err
		}
	}
	b.total, b.created, b.entries, b.max = total+b.groupTotal, created, n, t.LimitKeysMax()
	forget(b.keys, now)
	forget(b.groups, now)
	b.byCgroup.Store(b.heldByCgroup())
	return nil
}

// forget drops the keys of m that nothing saw for limitForget.
func forget[K comparable](m map[K]*limitKey, now time.Time) {
	for id, k := range m {
		if now.Sub(k.seen) > limitForget {
			delete(m, id)
		}
	}
}

// unattributed is what the kernel held back that no key's or bucket's
// event accounts for: known only once the programs are detached (final),
// as until then a count may wait for its key's first event.
func (b *limitBook) unattributed() uint64 {
	if !b.final {
		return 0
	}
	return b.total - min(b.total, b.suppressed+b.filtered+b.unresolved)
}

// evicted is how many keys the kernel's LRU dropped to make room.
func (b *limitBook) evicted() uint64 { return b.created - min(b.created, uint64(b.entries)) }

// held is every failure held back whose events were not filtered out: the
// suppressed count the trace reports.
func (b *limitBook) held() uint64 { return b.suppressed + b.unattributed() }

// heldByCgroup is the part of held that the cgroups' buckets held back:
// suppressed, and at the final read what no bucket's event accounts for.
func (b *limitBook) heldByCgroup() uint64 {
	n := b.groupSuppressed
	if b.final {
		n += b.groupTotal - min(b.groupTotal, b.groupRead)
	}
	return n
}

// cgroupCollector is eaddr_suppressed_cgroup_events_total, from the
// book's last read (safe from the HTTP goroutine).
func (b *limitBook) cgroupCollector() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "eaddr_suppressed_cgroup_events_total",
		Help: "Of eaddr_suppressed_events_total, the failures held back by their cgroup's bucket (--rate-limit-cgroup: a cgroup failing toward more addresses than its budget), not by their own key's; in their pod's eaddr_errors_total, in no event's suppressed.",
	}, func() float64 { return float64(b.byCgroup.Load()) })
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

// ParseCgroupRate reads --rate-limit-cgroup: a rate as ParseRate reads it,
// or "Nx", N times perKey (--rate-limit). It works with the rate limit per
// key: with that off (perKey 0), "Nx" is 0 too and a rate is an error.
func ParseCgroupRate(s string, perKey float64) (float64, error) {
	s = strings.TrimSpace(s)
	if times, ok := strings.CutSuffix(s, "x"); ok {
		n, err := strconv.ParseFloat(times, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a multiple of --rate-limit such as 10x", s)
		}
		return n * perKey, nil
	}
	n, err := ParseRate(s)
	if err == nil && n > 0 && perKey == 0 {
		err = fmt.Errorf("%s works with --rate-limit, which is off", s)
	}
	return n, err
}
