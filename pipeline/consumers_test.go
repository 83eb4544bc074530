package pipeline

import (
	"testing"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/kubeevent"
	"github.com/eaddr/eaddr/pod"
)

// A pod's failure that can get no Event, because the pod's name is not
// known, is counted as unnamed with the failures the rate limit held back
// behind it; a host process's failure, one its program makes on purpose and
// a named pod's are not.
func TestKubeEventsCountUnnamed(t *testing.T) {
	k := kubeevent.New(nil, kubeevent.Options{})
	c := kubeEvents{k}
	unnamed := &decode.Pod{UID: "uid-1", ContainerID: "cid-1"}
	for _, tc := range []struct {
		name     string
		ev       decode.Event
		expected bool
		want     uint64 // Unnamed after it
	}{
		{"unnamed pod, 4 held back", decode.Event{Pod: unnamed, PodNamesUnresolved: pod.NamesWait, Suppressed: 4}, false, 5},
		{"host process", decode.Event{}, false, 5},
		{"expected", decode.Event{Pod: unnamed, PodNamesUnresolved: pod.NamesWait}, true, 5},
		{"named pod", decode.Event{Pod: &namedPod}, false, 5},
		{"unnamed pod", decode.Event{Pod: unnamed}, false, 6},
	} {
		c.consume(&emitted{ev: &tc.ev, expected: tc.expected})
		if s := k.Stats(); s.Unnamed != tc.want || s.Dropped != 0 {
			t.Errorf("after %s: unnamed %d, dropped %d; want %d and 0", tc.name, s.Unnamed, s.Dropped, tc.want)
		}
	}
}
