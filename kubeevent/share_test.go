package kubeevent

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// toward is pod uid's failure toward 198.18.0.i:80.
func toward(uid string, i int, at time.Time) Failure {
	f := failure(uid, at)
	f.Reason = ReasonAddrNotAvail
	f.Dest = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 80)
	f.Verdict = ""
	f.Syscall, f.Errno = "bind", "EADDRNOTAVAIL"
	return f
}

// One pod failing toward 50 destinations gets PodKeys Events of its own
// and one that counts the other 42 (FailedTowardOtherDestinations, its
// note saying so and naming the first); another pod's one failure gets its
// Event. Nothing is dropped; the 42 are counted as folded.
func TestReporterPodShare(t *testing.T) {
	f, c := newFake(t)
	r := New(c, Options{Instance: "eaddr-node-a", QPS: 1000, UpdateEvery: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	now := time.Now()
	for i := range 50 {
		r.Report(toward("a", i, now.Add(time.Duration(i)*time.Millisecond)))
	}
	r.Report(toward("b", 0, now))
	waitFor(t, "the fold's count of 42", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.patches) > 0 && strings.Contains(f.patches[len(f.patches)-1], `"count":42`)
	})
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	byPod, folds := map[string]int{}, 0
	for _, e := range f.created {
		byPod[e.Regarding.UID]++
		if e.Reason == ReasonOtherDestinations {
			folds++
			if want := "this pod failed toward more destinations than get an Event each (8 per pod every 10m0s): this Event counts its failures toward the others; the first: bind() failed with EADDRNOTAVAIL (198.18.0."; !strings.HasPrefix(e.Note, want) {
				t.Errorf("the fold's note %q, want it to begin %q", e.Note, want)
			}
		}
	}
	if byPod["a"] != 9 || folds != 1 || byPod["b"] != 1 {
		t.Errorf("Events by pod %v, %d folds: want a 9 (8 and the fold), b 1", byPod, folds)
	}
	if s := r.Stats(); s.Folded != 42 || s.Dropped != 0 {
		t.Errorf("stats %+v: want 42 folded, none dropped", s)
	}
}

// With the node's keys all taken, a new key is made room for from the pod
// that holds the most, and a pod at its share makes room for its fold from
// its own: never from a pod that holds one key. The keys are added
// straight (add), as Run's loop does.
func TestReporterEvictsFromTheLargest(t *testing.T) {
	_, c := newFake(t)
	r := New(c, Options{MaxKeys: 9, PodKeys: 8})
	now := time.Now()
	r.add(toward("b", 0, now)) // the oldest of all
	for i := range 8 {
		r.add(toward("a", i, now.Add(time.Second)))
	}
	r.add(toward("a", 8, now.Add(2*time.Second))) // a's fold: room from a
	if r.entries[key{"b", ReasonAddrNotAvail, toward("b", 0, now).Dest}] == nil || len(r.entries) != 9 || !r.pods["a"].fold {
		t.Fatalf("a's fold took b's key: %d entries, pods %v", len(r.entries), r.pods)
	}
	r.add(toward("c", 0, now.Add(3*time.Second))) // room from a, the largest
	if r.entries[key{"b", ReasonAddrNotAvail, toward("b", 0, now).Dest}] == nil || r.pods["c"] == nil || r.pods["a"].entries() != 7 {
		t.Errorf("c's key: pods %v", sharesOf(r))
	}
	if s := r.Stats(); s.Dropped != 2 {
		t.Errorf("stats %+v: the two of a's evicted are 2 dropped", s)
	}
}

func sharesOf(r *Reporter) string {
	var b strings.Builder
	for p, s := range r.pods {
		fmt.Fprintf(&b, "%s:%+v ", p, *s)
	}
	return b.String()
}

// A pod's first Event goes before another pod's next: with a budget of
// three calls, pod b's one failure gets its Event though pod a has 200
// waiting for theirs (in the map's order, b's would go first 3 times in
// 201).
func TestReporterFirstEventFirst(t *testing.T) {
	f, c := newFake(t)
	r := New(c, Options{Burst: 3, QPS: 0.001, PodKeys: 100})
	now := time.Now()
	for i := range 200 {
		r.add(toward("a", i, now))
	}
	r.add(toward("b", 0, now))
	r.flush(context.Background(), now)
	f.mu.Lock()
	defer f.mu.Unlock()
	byPod := map[string]int{}
	for _, e := range f.created {
		byPod[e.Regarding.UID]++
	}
	if byPod["a"] != 2 || byPod["b"] != 1 {
		t.Errorf("Events by pod %v: want b's and two of a's", byPod)
	}
}
