package decode

import (
	"encoding/json"
	"testing"

	"github.com/eaddr/eaddr/decode/kube"
)

func TestPodMapper(t *testing.T) {
	m := NewPodMapper(nil, 4026531833)
	m.Proc = t.TempDir() // no /proc/PID/cgroup to fall back to
	ev := &Event{CgroupID: 7, NetNS: 4026532001, PID: 1 << 30,
		CgroupPath: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod03f3f104_3215_44f2_9686_d4dd1f05a7ed.slice/cri-containerd-09d185410c4e25236cc24717f881589bb0978b24eafd101624e627a4dd8d3439.scope"}
	m.Map(ev)
	if ev.Pod == nil || ev.Pod.UID != "03f3f104-3215-44f2-9686-d4dd1f05a7ed" || ev.Pod.QoS != "burstable" || ev.HostNetwork {
		t.Fatalf("pod %+v host %v", ev.Pod, ev.HostNetwork)
	}
	// Another process in the same netns whose cgroup says nothing: the pod
	// learned from the netns, without a container.
	other := &Event{CgroupID: 1, CgroupPath: "/", NetNS: 4026532001, PID: 1 << 30}
	m.Map(other)
	if other.Pod == nil || other.Pod.UID != ev.Pod.UID || other.Pod.ContainerID != "" {
		t.Errorf("same netns: %+v", other.Pod)
	}
	host := &Event{CgroupID: 1, CgroupPath: "/", NetNS: 4026531833, PID: 1 << 30}
	m.Map(host)
	if host.Pod != nil || !host.HostNetwork {
		t.Errorf("host: %+v %v", host.Pod, host.HostNetwork)
	}
	n := testing.AllocsPerRun(100, func() { m.Map(ev) })
	if n != 0 {
		t.Errorf("Map allocates %.1f times on a cached cgroup", n)
	}
}

func TestPodJSON(t *testing.T) {
	ev := Event{Pod: &kube.PodInfo{UID: "u", Name: "client", Namespace: "shop", Container: "app", ContainerID: "c", Image: "i", QoS: "besteffort",
		Labels: map[string]string{"b": "2", "a": "1"}}, HostNetwork: false}
	b := AppendJSON(nil, &ev, "n")
	var m struct {
		Pod map[string]any `json:"pod"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if m.Pod["name"] != "client" || m.Pod["namespace"] != "shop" || m.Pod["container"] != "app" || m.Pod["labels"].(map[string]any)["a"] != "1" {
		t.Errorf("pod JSON %s", b)
	}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendJSON(buf[:0], &ev, "n") }); n != 0 {
		t.Errorf("pod JSON allocates %.1f times", n)
	}
}
