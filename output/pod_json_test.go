package output

import (
	"encoding/json"
	"testing"

	"github.com/eaddr/eaddr/decode"
)

func TestPodJSON(t *testing.T) {
	ev := decode.Event{Pod: &decode.Pod{UID: "u", Name: "client", Namespace: "shop", Container: "app", ContainerID: "c", Image: "i", QoS: "besteffort",
		Runtime: "cri-o", Labels: map[string]string{"b": "2", "a": "1"}}, HostNetwork: false}
	b := appendJSON(nil, &ev, "n")
	var m struct {
		Pod map[string]any `json:"pod"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if m.Pod["name"] != "client" || m.Pod["namespace"] != "shop" || m.Pod["container"] != "app" || m.Pod["labels"].(map[string]any)["a"] != "1" ||
		m.Pod["runtime"] != "cri-o" {
		t.Errorf("pod JSON %s", b)
	}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = appendJSON(buf[:0], &ev, "n") }); n != 0 {
		t.Errorf("pod JSON allocates %.1f times", n)
	}
}
