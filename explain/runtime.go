package explain

import (
	"time"

	"github.com/eaddr/eaddr/decode"
)

type exeKey struct{ dev, ino uint64 }

type binEntry struct {
	Found
	at time.Time
}

// notYet is what an Async Detector says of a binary it has not learned.
var notYet = &binEntry{Found: Found{notAnalysed: whyNotYet}}

// Detector finds out, per event, how the failing program renders errnos,
// from its binary. The kernel gives each event the executable's device,
// inode and file name and the start of argv, so the binary is found even
// when the process exited before the event was handled (Finder). What is
// learned is cached per binary; a binary that could not be found is retried
// after NegativeTTL. A binary past the bounds on the work of analysing one
// (binLimits) is counted (BinariesGivenUp) and not looked at again while it
// is cached, unless it was the time budget that ran out. Not safe for
// concurrent use.
type Detector struct {
	MaxEntries  int
	NegativeTTL time.Duration
	// Async keeps the file system off the caller's goroutine: a binary
	// that is not cached is not looked for, and Explain says it is not
	// analysed yet. The caller finds it with a Finder on a goroutine of
	// its own and hands the result to Learn (or says why not: Refuse);
	// Known tells it whether a look is needed.
	Async bool

	finder *Finder // the lookups when not Async
	cache  map[exeKey]*binEntry
	now    func() time.Time
	// Lookups counts cache misses that went to the file system (for tests).
	Lookups             int
	givenUp, mismatched uint64
}

// newDetector returns a Detector on /proc.
func newDetector() *Detector {
	return &Detector{MaxEntries: 4096, NegativeTTL: 10 * time.Second, finder: NewFinder(),
		cache: make(map[exeKey]*binEntry), now: time.Now}
}

// binaryOf returns the analysis of ev's executable and how it was found
// ("exe", "path", or "cache:" + either). ok is false when it is unknown.
func (d *Detector) binaryOf(ev *decode.Event) (info *BinaryInfo, source string, ok bool) {
	e, source := d.lookup(ev)
	if e == nil || !e.ok {
		return nil, "", false
	}
	return &e.info, source, true
}

// lookup returns ev's entry and how it was found (as binaryOf), from the
// cache, or from the file system unless the Detector is Async; nil when ev
// names no executable. It does not allocate on a hit.
func (d *Detector) lookup(ev *decode.Event) (*binEntry, string) {
	if ev.ExeIno == 0 {
		return nil, ""
	}
	key := exeKey{ev.ExeDev, ev.ExeIno}
	if e := d.fresh(key); e != nil {
		return e, "cache"
	}
	if d.Async {
		return notYet, ""
	}
	d.Lookups++
	e := d.learn(key, d.finder.Find(ev))
	return e, e.source
}

// fresh is key's cache entry, unless it is a negative one due for another
// look.
func (d *Detector) fresh(key exeKey) *binEntry {
	e, hit := d.cache[key]
	if hit && (e.ok || (e.notAnalysed != "" && !e.retry) || d.now().Sub(e.at) < d.NegativeTTL) {
		return e
	}
	return nil
}

// Known reports whether Explain tells ev's binary without a look at the
// file system: it is cached, or ev names none.
func (d *Detector) Known(ev *decode.Event) bool {
	return ev.ExeIno == 0 || d.fresh(exeKey{ev.ExeDev, ev.ExeIno}) != nil
}

// Learn caches what a Finder found of ev's binary, and counts it.
func (d *Detector) Learn(ev *decode.Event, f Found) { d.learn(exeKey{ev.ExeDev, ev.ExeIno}, f) }

// Refuse caches that ev's binary is not analysed, and why (a NotAnalysed
// sentence), until NegativeTTL.
func (d *Detector) Refuse(ev *decode.Event, why string) {
	d.learn(exeKey{ev.ExeDev, ev.ExeIno}, Found{notAnalysed: why, retry: true})
}

func (d *Detector) learn(key exeKey, f Found) *binEntry {
	if f.gaveUp {
		d.givenUp++
	}
	if f.mismatched && !f.ok {
		d.mismatched++
	}
	e := &binEntry{Found: f, at: d.now()}
	if len(d.cache) >= d.MaxEntries {
		clear(d.cache) // rare: a node runs far fewer distinct binaries
	}
	d.cache[key] = e
	return e
}

// BinariesGivenUp counts the binaries not analysed because they were past
// the bounds on the work of analysing one: once per binary looked up
// (again after the cache forgot it, or NegativeTTL after its reading took
// too long).
func (d *Detector) BinariesGivenUp() uint64 { return d.givenUp }

// BinariesMismatched counts the binaries not analysed because no file at
// their path in their root was the executable the kernel recorded (the
// device or inode differed): once per binary looked up, again after
// NegativeTTL.
func (d *Detector) BinariesMismatched() uint64 { return d.mismatched }

// CacheSizes reports the binaries cached and the bound.
func (d *Detector) CacheSizes() (binaries, bound int) { return len(d.cache), d.MaxEntries }

// firstArg is argv[0] from the NUL-separated args.
func firstArg(args []byte) string {
	for i, c := range args {
		if c == 0 {
			return string(args[:i])
		}
	}
	return string(args)
}

// argAt returns argv[i] from the NUL-separated args without allocating, or
// nil when it was not captured.
func argAt(args []byte, i int) []byte {
	for ; i > 0; i-- {
		j := indexByte(args, 0)
		if j < 0 {
			return nil
		}
		args = args[j+1:]
	}
	if j := indexByte(args, 0); j >= 0 {
		return args[:j]
	}
	return args
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func baseName(b []byte) []byte {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '/' {
			return b[i+1:]
		}
	}
	return b
}
