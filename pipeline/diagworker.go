package pipeline

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/eaddr/eaddr/diagnose"

	"github.com/eaddr/eaddr/decode"
)

const (
	// DefaultDiagnoseWait is the longest an event waits for its netns
	// snapshot (Config.DiagnoseWait, --diagnose-wait); then it goes out
	// saying the diagnosis is not ready (later events of the same failure
	// share the snapshot when it is).
	DefaultDiagnoseWait = 300 * time.Millisecond
	// diagQueue bounds the requests waiting for the diagnosis goroutine.
	diagQueue = 1024
	// recentMax bounds the keys whose last snapshot the stage keeps; past
	// it they are all forgotten.
	recentMax = 4096
)

// diagWorker runs the Diagnoser on its own goroutine: a snapshot reads the
// netns through netlink and /proc, which takes milliseconds and, on a busy
// node, hundreds of them. The reader hands it copies of decoded events and
// never waits.
type diagWorker struct {
	d    *diagnose.Diagnoser
	pool *eventPool // the Events of the requests, given back once done
	reqs chan diagReq
	done chan struct{}

	mu        sync.Mutex
	results   map[uint64]*diagnose.Diagnosis // by ticket; nil: nothing to say
	abandoned map[uint64]bool                // tickets whose event went out without waiting
	next      uint64

	// Published for the reader (the Diagnoser itself is the worker's).
	snapshots, unreachable, cacheHandles, cacheBound atomic.Int64
	full                                             uint64 // requests refused, queue full (reader's)
}

type diagReq struct {
	seen   bool // only remember the process's netns (Diagnoser.Seen)
	ticket uint64
	ev     *decode.Event // lent by pool
}

func newDiagWorker(d *diagnose.Diagnoser) *diagWorker {
	w := &diagWorker{d: d, pool: newEventPool(diagQueue + 1), reqs: make(chan diagReq, diagQueue), done: make(chan struct{}),
		results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
	go w.run()
	return w
}

func (w *diagWorker) run() {
	defer close(w.done)
	for req := range w.reqs {
		if req.seen {
			w.d.Seen(req.ev)
			w.pool.put(req.ev)
			continue
		}
		g := w.d.Snapshot(req.ev) // the reader worked its key out: it is diagnosable
		w.pool.put(req.ev)
		w.mu.Lock()
		if w.abandoned[req.ticket] {
			delete(w.abandoned, req.ticket)
		} else {
			w.results[req.ticket] = g
		}
		w.mu.Unlock()
		w.publish()
	}
}

func (w *diagWorker) publish() {
	w.snapshots.Store(int64(w.d.Snapshots))
	w.unreachable.Store(int64(w.d.Unreachable))
	h, b := w.d.CacheSizes()
	w.cacheHandles.Store(int64(h))
	w.cacheBound.Store(int64(b))
}

// seen tells the worker a process lives in ev's netns, while it does; it is
// dropped when the queue is full (the failing process is tried first anyway).
func (w *diagWorker) seen(ev *decode.Event) {
	if len(w.reqs) >= cap(w.reqs) {
		return
	}
	e := w.pool.copyOf(ev)
	select {
	case w.reqs <- diagReq{seen: true, ev: e}:
	default:
		w.pool.put(e)
	}
}

// submit asks for the diagnosis of ev (a copy goes to the worker); false
// when the queue is full.
func (w *diagWorker) submit(ev *decode.Event) (ticket uint64, ok bool) {
	if len(w.reqs) >= cap(w.reqs) {
		w.full++
		return 0, false
	}
	e := w.pool.copyOf(ev)
	w.next++
	select {
	case w.reqs <- diagReq{ticket: w.next, ev: e}:
		return w.next, true
	default:
		w.pool.put(e)
		w.full++
		return 0, false
	}
}

// peek returns the diagnosis of ticket once it is there.
func (w *diagWorker) peek(ticket uint64) (g *diagnose.Diagnosis, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, ok = w.results[ticket]
	return g, ok
}

// drop forgets ticket: its result, when it comes, is dropped.
func (w *diagWorker) drop(ticket uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.results[ticket]; ok {
		delete(w.results, ticket)
		return
	}
	w.abandoned[ticket] = true
}

// close lets the worker finish what is queued and waits for it.
func (w *diagWorker) close() {
	close(w.reqs)
	<-w.done
}

// diagHeld is an event that passed the filters and the rate limit and waits
// for its diagnosis.
type diagHeld struct {
	ev        *decode.Event // its own copy, lent by traceRun.held
	ticket    uint64
	at, until time.Time // asked; the longest it waits
}

// diagShare is the diagnosis stage's one cache: the events of one key in
// one interval share one snapshot, asked of the worker once, so a storm sends
// the worker one request per key and interval, not one per event. The key is
// worked out once, by the reader (diagnose.KeyOf); the worker only takes
// snapshots.
type diagShare struct {
	interval time.Duration
	recent   map[diagnose.Key]recentDiag // the last snapshot of each key
	inflight map[diagnose.Key]uint64     // the ticket asked for each key
	waiting  map[uint64]*ticketState     // held events per ticket
	shared   uint64                      // events answered from recent or a ticket's result
	late     uint64                      // events that went out before their snapshot
	// waitMax is the longest an event waited for its snapshot, from its
	// ask to its line: the wait (at most Config.DiagnoseWait) and how late
	// the reader came back to it.
	waitMax time.Duration
}

type recentDiag struct {
	shared *diagnose.Diagnosis // the snapshot, marked shared
	at     time.Time
}

type ticketState struct {
	key    diagnose.Key
	refs   int
	used   bool                // the result went to one event: the others share it
	shared *diagnose.Diagnosis // its copy marked shared
}

func newDiagShare(interval time.Duration) *diagShare {
	return &diagShare{interval: interval, recent: map[diagnose.Key]recentDiag{}, inflight: map[diagnose.Key]uint64{},
		waiting: map[uint64]*ticketState{}}
}

// fresh returns a copy of the key's snapshot marked shared, if it is of
// this interval.
func (s *diagShare) fresh(k diagnose.Key, now time.Time) (*diagnose.Diagnosis, bool) {
	r, ok := s.recent[k]
	if !ok || now.Sub(r.at) >= s.interval {
		return nil, false
	}
	s.shared++
	return r.shared, true
}

// answered hands ticket's result to one held event: the first gets it as
// taken, the others as shared; the last one frees the ticket. The shared
// copy is made once per snapshot, not per event: records only read it.
func (s *diagShare) answered(w *diagWorker, ticket uint64, g *diagnose.Diagnosis, now time.Time) *diagnose.Diagnosis {
	st := s.waiting[ticket]
	out := g
	switch {
	case g == nil:
	case !st.used && g.Err != "" && s.lastGood(st.key, now) != nil:
		// The netns cannot be read any more (its last process exited): the
		// key's last snapshot is the best there is; asked again next interval.
		s.shared++
		out = s.lastGood(st.key, now)
		st.shared = out
	case !st.used:
		cp := *g
		cp.Shared = true
		st.shared = &cp
		if len(s.recent) >= recentMax {
			clear(s.recent)
		}
		s.recent[st.key] = recentDiag{shared: st.shared, at: now}
	default:
		s.shared++
		out = st.shared
	}
	st.used = true
	s.done(w, ticket, st)
	return out
}

// lastGood is k's last snapshot when it was taken (not an error), marked
// as of now so that the next interval asks again; nil when there is none.
func (s *diagShare) lastGood(k diagnose.Key, now time.Time) *diagnose.Diagnosis {
	r, ok := s.recent[k]
	if !ok || r.shared.Err != "" {
		return nil
	}
	s.recent[k] = recentDiag{shared: r.shared, at: now}
	return r.shared
}

// prefetch asks for k's snapshot unless one is asked or the key's last one
// will still be of its interval at until, when the event asks, and returns
// the ticket with a reference taken (0: nothing asked).
func (s *diagShare) prefetch(w *diagWorker, ev *decode.Event, k diagnose.Key, until time.Time) uint64 {
	if r, ok := s.recent[k]; ok && until.Sub(r.at) < s.interval {
		return 0
	}
	ticket, ok := s.inflight[k]
	if !ok {
		if len(w.reqs) >= cap(w.reqs) {
			return 0 // full: the event asks itself later, and is counted then
		}
		if ticket, ok = w.submit(ev); !ok {
			return 0
		}
		s.inflight[k] = ticket
		s.waiting[ticket] = &ticketState{key: k}
	}
	s.waiting[ticket].refs++
	return ticket
}

// unref drops a prefetch's reference; the last one frees the ticket.
func (s *diagShare) unref(w *diagWorker, ticket uint64) {
	if s == nil || ticket == 0 {
		return
	}
	if st := s.waiting[ticket]; st != nil {
		s.done(w, ticket, st)
	}
}

// gaveUp is an event that goes out before its ticket's result.
func (s *diagShare) gaveUp(w *diagWorker, ticket uint64) {
	s.late++
	s.done(w, ticket, s.waiting[ticket])
}

func (s *diagShare) done(w *diagWorker, ticket uint64, st *ticketState) {
	st.refs--
	if st.refs > 0 {
		return
	}
	delete(s.waiting, ticket)
	if s.inflight[st.key] == ticket {
		delete(s.inflight, st.key)
	}
	w.drop(ticket)
}

// lateDiagnosis is what an event says that went out before its snapshot,
// after waiting wait.
func lateDiagnosis(wait time.Duration) *diagnose.Diagnosis {
	return &diagnose.Diagnosis{Err: "the netns snapshot took longer than " + wait.String() + " (a busy node)",
		Verdict: "no diagnosis yet: the netns snapshot took longer than " + wait.String() + " (a busy node); later events of this failure carry it"}
}

var (
	diagFull = &diagnose.Diagnosis{Err: "too many diagnoses queued",
		Verdict: "no diagnosis: too many diagnoses were queued (counted as diagnoses_skipped)"}
)
