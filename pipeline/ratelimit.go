package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eaddr/eaddr/decode"
)

// limitBook accounts for the failures the kernel's rate limit held back
// (bpf/eaddr.h, struct limit_state). Each kernel key has an id that is never
// reused, carried by the events that pass; its per-CPU counts are read each
// tick (tracer.LimitStates). A failure is counted once, when read, where its
// key's latest event went: suppressed (and carried by the key's next
// written event), filtered, or filtered as unresolved. Counts of a key no
// event of which reached user space yet wait in the kernel; those of a key
// evicted before they were read are unattributed: in the totals, in no pod.
// Not safe for concurrent use; allocation-free once a key is known.
type limitBook struct {
	on   bool
	keys map[uint64]*limitKey // by kernel key id
	now  time.Time            // of the last read
	// final: the programs are detached and this is the last read, so
	// what is not attributed now never will be.
	final bool

	// Read from the kernel so far, by what became of the key's events.
	suppressed, filtered, unresolved uint64

	// From the kernel at the last read.
	total, created uint64 // limit_totals: every failure held back; keys made
	entries, max   int    // keys in the map, and its bound
}

type limitKey struct {
	collected uint64             // the kernel's count at the last read
	pending   uint64             // suppressed, not yet carried by an event
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

func newLimitBook(on bool) *limitBook { return &limitBook{on: on, keys: map[uint64]*limitKey{}} }

// event notes where an event of ev's key went, and returns how many
// failures of that key were read as held back since its previous written
// event: the event's "suppressed".
func (b *limitBook) event(ev *decode.Event, fate limitFate, errors prometheus.Counter) uint64 {
	if !ev.Limited {
		return 0
	}
	k := b.keys[ev.LimitID]
	if k == nil {
		k = &limitKey{}
		b.keys[ev.LimitID] = k
	}
	k.fate, k.errors, k.seen = fate, errors, b.now
	if fate != fateWritten {
		return 0
	}
	n := k.pending
	k.pending = 0
	return n
}

// collect counts what a key held back since the last read. A count below
// the last one is a short read (a CPU moved it from its slot to the map
// between the two reads: the next read has it) or, rarely, a count the
// kernel evicted and started again; either way nothing is counted now, and
// what never comes back is unattributed at the final read.
func (b *limitBook) collect(k *limitKey, total uint64) {
	if total <= k.collected {
		return
	}
	n := total - k.collected
	k.collected = total
	switch k.fate {
	case fateFiltered:
		b.filtered += n
	case fateUnresolved:
		b.unresolved += n
	default:
		b.suppressed += n
		k.pending += n
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
}

// limitEvery is how often read asks the kernel: the maps are read whole, and
// the tick may come every flush interval (50 ms).
const limitEvery = time.Second

// read collects every key's count from the kernel, at most once per
// limitEvery unless final, then forgets the keys the kernel no longer has
// and no event named for limitForget.
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
			b.collect(k, suppressed)
		}
	})
	if err != nil {
		return err
	}
	b.total, b.created, b.entries, b.max = total, created, n, t.LimitKeysMax()
	for id, k := range b.keys {
		if now.Sub(k.seen) > limitForget {
			delete(b.keys, id)
		}
	}
	return nil
}

// unattributed is what the kernel held back that no key's event accounts
// for: known only once the programs are detached (final), as until then a
// count may wait for its key's first event.
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
