package pod

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
)

const (
	podPath  = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod03f3f104_3215_44f2_9686_d4dd1f05a7ed.slice/cri-containerd-09d185410c4e25236cc24717f881589bb0978b24eafd101624e627a4dd8d3439.scope"
	podUID   = "03f3f104-3215-44f2-9686-d4dd1f05a7ed"
	pod2Path = "/kubepods/besteffort/pod4eede96e-e976-4573-bc90-68dfe2516d3b/c3cd4e0a7993a1c155cc1bdd3326c7b1e260226d0c2c79e3e48dbc360543c768"
	pod2UID  = "4eede96e-e976-4573-bc90-68dfe2516d3b"
	hostNS   = 4026531833
)

// TestPodMapper: the cgroup decides; netns -> pod only by cookie, only for a
// process outside any pod cgroup, never in the host netns, never when two pods
// were seen in it; an unknown cgroup says why instead of borrowing.
func TestPodMapper(t *testing.T) {
	m := NewPodMapper(nil, hostNS)
	m.Proc = t.TempDir()                         // no /proc/PID to fall back to
	m.PodsPossible = func() bool { return true } // a node with pods
	ev := &decode.Event{CgroupID: 7, NetNS: 4026532001, NetNSCookie: 501, PID: 1 << 30, CgroupPath: podPath}
	m.Map(ev, false)
	if ev.Pod == nil || ev.Pod.UID != podUID || ev.Pod.QoS != "burstable" || ev.Pod.Runtime != "containerd" || ev.HostNetwork || ev.PodVia != "" {
		t.Fatalf("pod %+v host %v via %q", ev.Pod, ev.HostNetwork, ev.PodVia)
	}
	// Same netns, a process whose cgroup is known and not a pod's: the pod
	// of the netns, without a container, marked as such.
	other := &decode.Event{CgroupID: 8, CgroupPath: "/system.slice/ssh.service", NetNS: 4026532001, NetNSCookie: 501, PID: 1 << 30}
	m.Map(other, false)
	if other.Pod == nil || other.Pod.UID != podUID || other.Pod.ContainerID != "" || other.PodVia != "netns" {
		t.Errorf("same netns: %+v via %q", other.Pod, other.PodVia)
	}
	// The netns inode reused by a new netns (another cookie): no pod.
	reused := &decode.Event{CgroupID: 8, CgroupPath: "/system.slice/ssh.service", NetNS: 4026532001, NetNSCookie: 777, PID: 1 << 30}
	m.Map(reused, false)
	if reused.Pod != nil {
		t.Errorf("reused netns inode inherited %+v", reused.Pod)
	}
	// Unknown cgroup, process gone: no pod, a reason; never the netns's pod.
	unknown := &decode.Event{CgroupID: 9, CgroupUnresolved: "gone", NetNS: 4026532001, NetNSCookie: 501, PID: 1 << 30, StartBoottime: 5}
	m.Map(unknown, false)
	if unknown.Pod != nil || unknown.PodUnresolved == "" {
		t.Errorf("unknown cgroup: pod %+v, reason %q", unknown.Pod, unknown.PodUnresolved)
	}
	// A second pod seen in the same netns: each keeps its own pod, and the
	// netns is no longer used for processes outside pod cgroups.
	ev2 := &decode.Event{CgroupID: 10, NetNS: 4026532001, NetNSCookie: 501, PID: 1 << 30, CgroupPath: pod2Path}
	m.Map(ev2, false)
	if ev2.Pod == nil || ev2.Pod.UID != pod2UID || ev2.Pod.Runtime != "" {
		t.Fatalf("second pod (cgroupfs: no runtime in the path): %+v", ev2.Pod)
	}
	m.Map(other, false)
	if other.Pod != nil {
		t.Errorf("ambiguous netns still attributed: %+v", other.Pod)
	}
	// Host netns: never a pod by netns.
	host := &decode.Event{CgroupID: 8, CgroupPath: "/system.slice/ssh.service", NetNS: hostNS, NetNSCookie: 1, PID: 1 << 30}
	m.Map(host, false)
	if host.Pod != nil || !host.HostNetwork {
		t.Errorf("host: %+v %v", host.Pod, host.HostNetwork)
	}
	// The v2 root on a host with v1 controllers: /proc/PID/cgroup only while
	// PID is the same process; here it is gone.
	m.CgroupV1 = true
	root := &decode.Event{CgroupID: 1, CgroupPath: "/", NetNS: 4026532001, NetNSCookie: 501, PID: 1 << 30, StartBoottime: 5}
	m.Map(root, false)
	if root.Pod != nil || root.PodUnresolved == "" {
		t.Errorf("v2 root on a v1 host: pod %+v, reason %q", root.Pod, root.PodUnresolved)
	}
	n := testing.AllocsPerRun(100, func() { m.Map(ev, false) })
	if n != 0 {
		t.Errorf("Map allocates %.1f times on a cached cgroup", n)
	}
}

// TestWithNames: the runtime's names join the pod the cgroup path named, and
// what the path says stays the path's: a runtime answer without the QoS or
// the runtime, or with another, changes neither; a pod-level cgroup keeps no
// container.
func TestWithNames(t *testing.T) {
	base := &decode.Pod{UID: podUID, ContainerID: "c1", QoS: "burstable", Runtime: "cri-o"}
	info := &decode.Pod{UID: podUID, Name: "client", Namespace: "shop", Container: "app", ContainerID: "c1", Image: "busybox",
		QoS: "besteffort", Labels: map[string]string{"app": "client"}}
	got := withNames(base, info)
	if got.Name != "client" || got.Namespace != "shop" || got.Container != "app" || got.ContainerID != "c1" || got.Image != "busybox" ||
		got.Labels["app"] != "client" || got.UID != podUID || got.QoS != "burstable" || got.Runtime != "cri-o" {
		t.Errorf("container: %+v", got)
	}
	if info.QoS != "besteffort" || info.Runtime != "" {
		t.Errorf("the runtime's answer was changed: %+v", info)
	}
	podLevel := &decode.Pod{UID: podUID, QoS: "guaranteed", Runtime: "containerd"}
	got = withNames(podLevel, info)
	if got.Name != "client" || got.Container != "" || got.ContainerID != "" || got.Image != "" || got.QoS != "guaranteed" || got.Runtime != "containerd" {
		t.Errorf("pod-level cgroup: %+v", got)
	}
}

// TestPodMapperProcFallback: on a v1 host a live process's /proc/PID/cgroup
// names its pod, but only while PID is the process that failed.
func TestPodMapperProcFallback(t *testing.T) {
	proc := t.TempDir()
	dir := proc + "/4242"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// starttime (field 22) 1234 ticks = 12.34 s after boot.
	stat := "4242 (a b) c) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1234 0 0\n"
	if err := os.WriteFile(dir+"/stat", []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/cgroup", []byte("4:memory:"+pod2Path+"\n0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewPodMapper(nil, hostNS)
	m.PodsPossible = func() bool { return true }
	m.Proc, m.CgroupV1 = proc, true
	same := &decode.Event{CgroupID: 1, CgroupPath: "/", NetNS: 4026532001, PID: 4242, StartBoottime: 12_345_000_000}
	m.Map(same, false)
	if same.Pod == nil || same.Pod.UID != pod2UID {
		t.Fatalf("same process: %+v (%s)", same.Pod, same.PodUnresolved)
	}
	reusedPID := &decode.Event{CgroupID: 1, CgroupPath: "/", NetNS: 4026532001, PID: 4242, StartBoottime: 99_000_000_000}
	m.Map(reusedPID, false)
	if reusedPID.Pod != nil || reusedPID.PodUnresolved == "" {
		t.Fatalf("reused pid: %+v (%q)", reusedPID.Pod, reusedPID.PodUnresolved)
	}
}

// TestPodMapperNodeWithoutPods: on a node with no pod cgroups, a process
// whose cgroup says nothing (the v2 root of a hybrid host, the process gone;
// a cgroup not resolved) carries nothing about pods: no pod, no reason. A
// pod's cgroup path still names its pod: the cgroup decides first.
func TestPodMapperNodeWithoutPods(t *testing.T) {
	m := NewPodMapper(nil, hostNS)
	m.Proc = t.TempDir()
	m.CgroupV1 = true
	asked := 0
	m.PodsPossible = func() bool { asked++; return false }
	root := &decode.Event{CgroupID: 1, CgroupPath: "/", NetNS: hostNS, PID: 1 << 30, StartBoottime: 5}
	m.Map(root, false)
	if root.Pod != nil || root.PodUnresolved != "" || !root.HostNetwork {
		t.Errorf("v2 root, no pods on the node: pod %+v, reason %q, host %v", root.Pod, root.PodUnresolved, root.HostNetwork)
	}
	gone := &decode.Event{CgroupID: 9, CgroupUnresolved: "gone", NetNS: 4026532001, PID: 1 << 30, StartBoottime: 5}
	m.Map(gone, false)
	if gone.Pod != nil || gone.PodUnresolved != "" {
		t.Errorf("unresolved cgroup, no pods on the node: pod %+v, reason %q", gone.Pod, gone.PodUnresolved)
	}
	ev := &decode.Event{CgroupID: 7, NetNS: 4026532001, PID: 1 << 30, CgroupPath: podPath}
	m.Map(ev, false)
	if ev.Pod == nil || ev.Pod.UID != podUID {
		t.Errorf("a pod cgroup path lost its pod: %+v", ev.Pod)
	}
	if asked != 1 {
		t.Errorf("PodsPossible asked %d times within %v, want once", asked, podsCheckEvery)
	}
}

// TestPodsPossibleRechecked: the answer is kept for podsCheckEvery and asked
// again after it, on a controlled clock: a kubelet started after eaddr counts.
func TestPodsPossibleRechecked(t *testing.T) {
	m := NewPodMapper(nil, hostNS)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	pods := false
	asked := 0
	m.PodsPossible = func() bool { asked++; return pods }
	if m.podsPossible() {
		t.Fatal("no pods yet")
	}
	pods = true
	now = now.Add(podsCheckEvery - time.Millisecond)
	if m.podsPossible() || asked != 1 {
		t.Fatalf("asked again before %v (asked %d)", podsCheckEvery, asked)
	}
	now = now.Add(time.Millisecond)
	if !m.podsPossible() || asked != 2 {
		t.Fatalf("not asked again after %v (asked %d)", podsCheckEvery, asked)
	}
}

// TestFindKubepods: the kubepods cgroup is found where kubelets make it, at
// most podDepth levels down, and nothing is found without one.
func TestFindKubepods(t *testing.T) {
	for _, tc := range []struct {
		dirs  []string
		found string
	}{
		{[]string{"system.slice/ssh.service", "user.slice/user-0.slice/session-1.scope"}, ""},
		{[]string{"system.slice", "kubepods/besteffort"}, "kubepods"},
		{[]string{"system.slice", "kubepods.slice/kubepods-burstable.slice"}, "kubepods.slice"},
		{[]string{"kubelet.slice/kubelet-kubepods.slice"}, "kubelet.slice/kubelet-kubepods.slice"},
		{[]string{"a/b/kubepods"}, ""}, // deeper than podDepth
	} {
		root := t.TempDir()
		for _, d := range tc.dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		where, found := findKubepods(root, podDepth)
		want := ""
		if tc.found != "" {
			want = filepath.Join(root, tc.found)
		}
		if found != (tc.found != "") || where != want {
			t.Errorf("%v: found %v at %q, want %q", tc.dirs, found, where, want)
		}
	}
}
