package pipeline

import (
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
)

// A held event's prefetch asks once per key, shares the ticket with the
// key's other held events, holds it until the last of them is processed,
// asks nothing when the interval has a snapshot, and counts nothing as
// skipped when the queue is full (the event asks itself later).
func TestDiagPrefetch(t *testing.T) {
	w := &diagWorker{pool: newEventPool(3), reqs: make(chan diagReq, 3), results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
	s := newDiagShare(time.Second)
	var ev decode.Event
	now := time.Now()
	key := func(netns uint32) diagnose.Key {
		k, ok := diagnose.KeyOf(&decode.Event{NetNS: netns, Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL})
		if !ok {
			t.Fatal("no diagnosis key for a connect EADDRNOTAVAIL")
		}
		return k
	}
	k1, k2, k3 := key(1), key(2), key(3)
	a := s.prefetch(w, &ev, k1, now)
	b := s.prefetch(w, &ev, k1, now)
	if a == 0 || a != b || len(w.reqs) != 1 || s.waiting[a].refs != 2 {
		t.Fatalf("two prefetches of one key: tickets %d %d, %d requests, refs %d; want one shared ticket, one request, 2 refs", a, b, len(w.reqs), s.waiting[a].refs)
	}
	s.unref(w, a)
	if s.inflight[k1] != a {
		t.Fatalf("the ticket was freed with a reference left")
	}
	s.unref(w, a)
	if _, ok := s.inflight[k1]; ok || s.waiting[a] != nil || !w.abandoned[a] {
		t.Errorf("the last reference did not free the ticket (inflight %v, waiting %v, abandoned %v)", s.inflight, s.waiting, w.abandoned)
	}
	s.recent[k2] = recentDiag{at: now}
	if tk := s.prefetch(w, &ev, k2, now); tk != 0 {
		t.Errorf("a key with a snapshot of this interval was asked again (ticket %d)", tk)
	}
	if tk := s.prefetch(w, &ev, k2, now.Add(time.Second)); tk == 0 {
		t.Errorf("a key whose snapshot is stale when the event asks was not asked")
	}
	w.reqs <- diagReq{} // the queue is full now
	if tk := s.prefetch(w, &ev, k3, now); tk != 0 || w.full != 0 {
		t.Errorf("with the queue full: ticket %d, skipped %d; want 0 and nothing counted", tk, w.full)
	}
	s.unref(w, 0)
	var none *diagShare
	none.unref(w, 7) // without diagnosis there is no share: no panic
}

// The stage's one cache: the events of a key share its snapshot, counted
// once each as shared; when a later snapshot of the key cannot be taken
// (the netns's last process exited), its events get the key's last good
// snapshot, marked shared, and the next interval asks again.
func TestDiagShareKeepsTheLastGood(t *testing.T) {
	w := &diagWorker{pool: newEventPool(4), reqs: make(chan diagReq, 4), results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
	s := newDiagShare(time.Second)
	var ev decode.Event
	k, _ := diagnose.KeyOf(&decode.Event{NetNS: 1, Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL})
	now := time.Unix(1000, 0)
	ask := func() uint64 {
		tk := s.prefetch(w, &ev, k, now)
		s.waiting[tk].refs++ // a second event of the key
		return tk
	}
	good := &diagnose.Diagnosis{Verdict: "ephemeral ports exhausted"}
	tk := ask()
	if g := s.answered(w, tk, good, now); g != good || g.Shared {
		t.Fatalf("the first event: %+v, want the snapshot as taken", g)
	}
	if g := s.answered(w, tk, good, now); !g.Shared || g.Verdict != good.Verdict || s.shared != 1 {
		t.Fatalf("the second event: %+v (shared %d), want it shared, counted once", g, s.shared)
	}
	now = now.Add(2 * time.Second)
	gone := &diagnose.Diagnosis{Err: "no live process", Verdict: "no diagnosis: network namespace 1 is gone"}
	tk = ask()
	for i := range 2 {
		if g := s.answered(w, tk, gone, now); g.Err != "" || !g.Shared || g.Verdict != good.Verdict {
			t.Fatalf("event %d after the netns went: %+v, want the last good snapshot, shared", i, g)
		}
	}
	if s.shared != 3 {
		t.Errorf("shared %d, want 3", s.shared)
	}
	if tk := s.prefetch(w, &ev, k, now.Add(time.Second)); tk == 0 {
		t.Errorf("the next interval did not ask again")
	}
}
