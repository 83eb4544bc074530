package kubeevent

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"
)

// Failure is one failure of a pod, as the trace hands it over, or a port
// warning (Reason ReasonNearlyExhausted or ReasonNodeSNATNearlyExhausted,
// from the port sampler: no failure yet, Count 1 per sample). Its strings must not change afterwards (the
// pod's names come from the CRI cache, the note from the diagnosis: both are
// never modified).
type Failure struct {
	PodUID, PodName, Namespace string
	Reason, Action             string
	Dest                       netip.AddrPort // connect: the destination; bind: the address; zero for unix sockets
	// Verdict and Fix are the diagnosis's, when there is one; otherwise
	// Syscall, Errno and Meaning say what failed.
	Verdict, Fix            string
	Syscall, Errno, Meaning string
	Count                   int32 // failures it stands for: 1, plus those the rate limit held back
	At                      time.Time
}

// Options tune a Reporter; zero values take the defaults.
type Options struct {
	Instance    string        // reportingInstance, e.g. "eaddr-node-a"
	QPS         float64       // API calls per second per node (5)
	Burst       int           // calls at once (10)
	Interval    time.Duration // one Event per pod, reason and destination per interval (10m)
	UpdateEvery time.Duration // an Event's count is updated at most this often (30s)
	Queue       int           // failures waiting for the worker (1024)
	MaxKeys     int           // Events being counted at once (4096)
	Logger      *slog.Logger
	// PodKeys is how many Events of its own (reasons and destinations) a
	// pod may have being counted at once, so about per Interval (8); its
	// failures toward others are counted in one more Event of the pod
	// (ReasonOtherDestinations), its port warnings toward others dropped.
	PodKeys int
}

// Stats are a Reporter's totals.
type Stats struct {
	Created, Updated uint64 // API calls that succeeded
	Errors           uint64 // API calls that failed (an error, a timeout, a refusal)
	// Dropped counts failures that reached no Event: the queue was full,
	// creating their Event failed, or they were still unsent at stop or
	// when their key had to make room.
	Dropped uint64
	// Folded counts failures counted in their pod's Event for destinations
	// past its share (ReasonOtherDestinations), not in one of their own.
	// Not in Dropped (unless that Event could not be made either).
	Folded uint64
	// Unnamed counts failures of a pod that reached no Event because eaddr
	// did not know the pod's name and namespace (the runtime had not named
	// it), which an Event is attached to. Not in Dropped.
	Unnamed uint64
	// WarningsDropped counts port warnings (ReasonNearlyExhausted: one per
	// sample that found a pod's netns at or above --warn toward a
	// destination; ReasonNodeSNATNearlyExhausted: one per sample that found
	// the node's SNAT so) that reached no Event, for any of Dropped's reasons or
	// because the pod's name was not known. They are no failures: not in
	// Dropped or Unnamed.
	WarningsDropped uint64
}

// Reporter turns failures into Events: Report queues without waiting; Run
// aggregates and calls the API server.
type Reporter struct {
	c       *Client
	o       Options
	q       chan Failure
	entries map[key]*entry
	pods    map[string]*share // what each pod with entries holds of them
	tokens  float64
	refill  time.Time

	created, updated, errs, dropped, folded, unnamed, warningsDropped atomic.Uint64
}

// key is an Event's: a pod's reason and destination, or a pod's fold
// (reason "", no destination).
type key struct {
	uid, reason string
	dest        netip.AddrPort
}

type entry struct {
	f           Failure // the first: what the Event says
	fold        bool    // the pod's Event for destinations past its share
	name        string  // the Event's name once created
	count, sent int32   // failures seen; those the API server has
	first, last time.Time
	called      time.Time // the last API call for it
}

// New returns a Reporter on c.
func New(c *Client, o Options) *Reporter {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Burst, 10)
	def(&o.Queue, 1024)
	def(&o.MaxKeys, 4096)
	def(&o.PodKeys, 8)
	if o.QPS <= 0 {
		o.QPS = 5
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Minute
	}
	if o.UpdateEvery <= 0 {
		o.UpdateEvery = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reporter{c: c, o: o, q: make(chan Failure, o.Queue), entries: map[key]*entry{}, pods: map[string]*share{},
		tokens: float64(o.Burst)}
}

// SetLogger sets where the reporter logs its API errors; call it before Run.
func (r *Reporter) SetLogger(l *slog.Logger) { r.o.Logger = l }

// Report queues f. It never waits: with the queue full, f is counted as
// dropped and false returned.
func (r *Reporter) Report(f Failure) bool {
	select {
	case r.q <- f:
		return true
	default:
		r.lose(&f, max(f.Count, 1))
		return false
	}
}

// lose counts n of f's kind that reached no Event: failures, or port
// warnings.
func (r *Reporter) lose(f *Failure, n int32) {
	if f.warning() {
		r.warningsDropped.Add(uint64(n))
		return
	}
	r.dropped.Add(uint64(n))
}

// warning: f is a port warning (of the pod's ports or of the node's SNAT),
// no failure.
func (f *Failure) warning() bool {
	return f.Reason == ReasonNearlyExhausted || f.Reason == ReasonNodeSNATNearlyExhausted
}

// UnnamedWarning counts a port warning of a pod whose name is not known:
// no Event can be attached to it (Stats.WarningsDropped).
func (r *Reporter) UnnamedWarning() { r.warningsDropped.Add(1) }

// Unnamed counts count failures of a pod whose name is not known: no
// Event can be attached to it (Stats.Unnamed).
func (r *Reporter) Unnamed(count int32) { r.unnamed.Add(uint64(max(count, 1))) }

// Stats returns the totals so far; safe from any goroutine.
func (r *Reporter) Stats() Stats {
	return Stats{Created: r.created.Load(), Updated: r.updated.Load(), Errors: r.errs.Load(), Dropped: r.dropped.Load(),
		Folded: r.folded.Load(), Unnamed: r.unnamed.Load(), WarningsDropped: r.warningsDropped.Load()}
}

// tick is how often Run looks for Events to create or update.
const tick = 200 * time.Millisecond

// Run aggregates and reports until ctx is done, then sends what it still
// can within a second and counts the rest as dropped.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case f := <-r.q:
			r.add(f)
		case now := <-t.C:
			r.flush(ctx, now)
		case <-ctx.Done():
			r.drain()
			return
		}
	}
}

// drain takes what is queued and sends it within a second, then counts
// what is left.
func (r *Reporter) drain() {
	for n := len(r.q); n > 0; n-- {
		r.add(<-r.q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.tokens = float64(r.o.Burst)
	r.flush(ctx, time.Now().Add(r.o.UpdateEvery)) // due now: every update is
	for k, e := range r.entries {
		r.lose(&e.f, e.count-e.sent)
		r.remove(k, e)
	}
}

// add counts f under its key, or its pod's fold past the pod's share
// (place). A port warning of a pod that already has an exhausted Event
// toward the same destination is left out: the failure's Event says more.
func (r *Reporter) add(f Failure) {
	n := max(f.Count, 1)
	if f.Reason == ReasonNearlyExhausted && r.entries[key{f.PodUID, ReasonExhausted, f.Dest}] != nil {
		return
	}
	e := r.entries[key{f.PodUID, f.Reason, f.Dest}]
	if e == nil {
		if e = r.place(&f); e == nil {
			return
		}
	}
	e.count += n
	e.last = f.At
	if e.fold {
		r.folded.Add(uint64(n))
	}
}

// flush creates the Events not yet created and updates the counts that
// grew, within the call budget; an Event whose interval is over and whose
// count the API server has is forgotten (the next failure starts another).
// A pod's first Event goes before any pod's next: a pod that fails toward
// many destinations cannot spend the budget another pod's first failure
// needs.
func (r *Reporter) flush(ctx context.Context, now time.Time) {
	r.refillTokens(now)
	for k, e := range r.entries {
		if e.name == "" && r.pods[k.uid].created == 0 && r.take() {
			r.createEvent(ctx, k, e)
		}
	}
	for k, e := range r.entries {
		switch {
		case e.name == "":
			if !r.take() {
				continue
			}
			r.createEvent(ctx, k, e)
		case e.count > e.sent && now.Sub(e.called) >= r.o.UpdateEvery:
			if !r.take() {
				continue
			}
			r.updateEvent(ctx, e)
		case e.count == e.sent && now.Sub(e.first) >= r.o.Interval:
			r.remove(k, e)
		}
	}
}

func (r *Reporter) createEvent(ctx context.Context, k key, e *entry) {
	e.called = time.Now()
	note := e.f.note()
	if e.fold {
		note = foldNote(&e.f, r.o.PodKeys, r.o.Interval)
	}
	name, err := r.c.create(ctx, &e.f, note, r.o.Instance, e.first)
	if err != nil {
		r.errs.Add(1)
		r.lose(&e.f, e.count)
		r.remove(k, e)
		r.o.Logger.Warn("could not create a Kubernetes Event; what it stood for is counted as dropped (eaddr_kube_events_dropped_total, or eaddr_kube_port_warnings_dropped_total for a port warning)",
			"pod", e.f.Namespace+"/"+e.f.PodName, "reason", e.f.Reason, "err", err)
		return
	}
	r.created.Add(1)
	r.pods[k.uid].created++
	e.name, e.sent = name, 1 // the rest of the count goes in the next update
}

func (r *Reporter) updateEvent(ctx context.Context, e *entry) {
	e.called = time.Now()
	if err := r.c.update(ctx, e.f.Namespace, e.name, e.count, e.last); err != nil {
		r.errs.Add(1) // the count is kept: the next update carries it
		r.o.Logger.Warn("could not update a Kubernetes Event's count", "event", e.f.Namespace+"/"+e.name, "err", err)
		return
	}
	r.updated.Add(1)
	e.sent = e.count
}

func (r *Reporter) refillTokens(now time.Time) {
	if !r.refill.IsZero() {
		r.tokens = min(float64(r.o.Burst), r.tokens+now.Sub(r.refill).Seconds()*r.o.QPS)
	}
	r.refill = now
}

func (r *Reporter) take() bool {
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}
