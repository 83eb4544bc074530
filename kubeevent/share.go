package kubeevent

import (
	"fmt"
	"time"
)

// A pod's share of the Events: at most PodKeys of its own being counted at
// once, then one that counts its failures toward every other destination,
// so that a pod failing toward thousands of addresses (bind() on random
// ones) holds PodKeys+1 of the node's keys and calls, never the rest; and
// room for a new key is made from the pod that holds the most, never from
// another pod for one over its share (which folds instead).

// share is what one pod holds of the reporter's entries.
type share struct {
	keys    int  // its entries but the fold
	fold    bool // its fold entry exists
	created int  // its entries whose Event was made
}

// place makes f's entry: under its own key while its pod holds fewer than
// PodKeys, else in the pod's fold entry (made if need be); a port warning
// past the share is dropped and counted instead (nil).
func (r *Reporter) place(f *Failure) *entry {
	s := r.pods[f.PodUID]
	if s == nil {
		s = &share{}
		r.pods[f.PodUID] = s
	}
	k, fold := key{f.PodUID, f.Reason, f.Dest}, s.keys >= r.o.PodKeys
	if fold {
		if f.warning() {
			r.lose(f, max(f.Count, 1))
			return nil
		}
		k = key{uid: f.PodUID}
		if e := r.entries[k]; e != nil {
			return e
		}
	}
	if len(r.entries) >= r.o.MaxKeys {
		r.evict(f.PodUID, fold)
	}
	e := &entry{f: *f, first: f.At, fold: fold}
	if fold {
		e.f.Reason, s.fold = ReasonOtherDestinations, true
	} else {
		s.keys++
	}
	r.entries[k] = e
	return e
}

// evict makes room for a new entry of pod uid: the oldest entry of the pod
// itself when the new one is its fold (it is at its share), else of the pod
// that holds the most. What the entry counted and the API server does not
// have is counted as dropped.
func (r *Reporter) evict(uid string, fold bool) {
	victim := uid
	if !fold {
		most := -1
		for p, s := range r.pods {
			if n := s.entries(); n > most {
				victim, most = p, n
			}
		}
	}
	var oldest key
	var e *entry
	for k, c := range r.entries {
		if k.uid == victim && (e == nil || c.last.Before(e.last)) {
			oldest, e = k, c
		}
	}
	if e == nil {
		return // uid holds nothing yet: the map may go one over
	}
	r.lose(&e.f, e.count-e.sent)
	r.remove(oldest, e)
}

func (s *share) entries() int {
	if s.fold {
		return s.keys + 1
	}
	return s.keys
}

// remove forgets entry e under k, and its pod when it has no more.
func (r *Reporter) remove(k key, e *entry) {
	delete(r.entries, k)
	s := r.pods[k.uid]
	if s == nil {
		return
	}
	if e.fold {
		s.fold = false
	} else {
		s.keys--
	}
	if e.name != "" {
		s.created--
	}
	if s.entries() == 0 {
		delete(r.pods, k.uid)
	}
}

// foldNote is the note of a pod's Event for its failures past its share,
// the first of which is f.
func foldNote(f *Failure, podKeys int, interval time.Duration) string {
	return fmt.Sprintf("this pod failed toward more destinations than get an Event each (%d per pod every %v): this Event counts its failures toward the others; the first: %s",
		podKeys, interval, f.note())
}
