package kube

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// Every real path of testdata/cgroups/layouts.tsv parses to its pod.
func TestParseCgroupLayouts(t *testing.T) {
	f, err := os.Open("../../testdata/cgroups/layouts.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	n := 0
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Split(line, "\t")
		if len(fs) != 6 {
			t.Fatalf("bad line %q", line)
		}
		dash := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		want := CgroupPod{UID: fs[1], QoS: fs[2], ContainerID: dash(fs[3]), Runtime: dash(fs[4])}
		got, ok := ParseCgroupPath(fs[0])
		if !ok || got != want {
			t.Errorf("%s (%s):\n got %+v %v\nwant %+v", fs[0], fs[5], got, ok, want)
		}
		n++
	}
	if n < 8 {
		t.Errorf("only %d layouts", n)
	}
}

func TestParseCgroupNotPods(t *testing.T) {
	for _, p := range []string{
		"", "/", "/system.slice/containerd.service", "/user.slice/user-1000.slice/session-2.scope",
		"/kubepods", "/kubepods/besteffort", "/kubepods.slice/kubepods-burstable.slice",
		"/kubepods/besteffort/podnotauid/abc", "/kubepods.slice/kubepods-pod12.slice",
		"/init.scope", "/docker/d6701ec289c56e4391acb11d07474b3139466857a305490575508a8b7a9fcf22",
		"/pod", "/kubepods-.slice", "/x-pod4eede96e-e976-4573-bc90-68dfe2516d3b.slice",
	} {
		if got, ok := ParseCgroupPath(p); ok {
			t.Errorf("%q parsed as %+v", p, got)
		}
	}
	// The pod-level cgroup: a pod, no container.
	got, ok := ParseCgroupPath("/kubepods/burstable/pod4eede96e-e976-4573-bc90-68dfe2516d3b")
	if !ok || got.ContainerID != "" || got.QoS != "burstable" {
		t.Errorf("pod cgroup: %+v %v", got, ok)
	}
	// A guaranteed pod has no QoS level in the path (shape from kubelet's
	// cgroupfs naming; not a recorded path).
	got, ok = ParseCgroupPath("/kubepods/pod4eede96e-e976-4573-bc90-68dfe2516d3b/c3cd4e0a7993a1c155cc1bdd3326c7b1e260226d0c2c79e3e48dbc360543c768")
	if !ok || got.QoS != "guaranteed" || got.ContainerID == "" {
		t.Errorf("guaranteed: %+v %v", got, ok)
	}
	// CRI-O's conmon, in the pod's cgroup beside the container's (CRI-O with
	// conmon_cgroup = "pod"), is CRI-O's process, not the pod's: no pod. The
	// systemd path was seen in opencontainers/runc#4620 (systemctl status
	// crio-conmon-32da98c8....scope, the process /usr/bin/conmon -c <id>); the
	// cgroupfs one is the shape of CRI-O's CgroupfsManager.MoveConmonToCgroup.
	for _, p := range []string{
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod207aaad1_659f_4db8_88e0_46e0cdcc3004.slice/crio-conmon-32da98c8522068be05a7510a3eddb09cad6ed2f03286180d0e931d0d0b6224a6.scope",
		"/kubepods/burstable/pod207aaad1-659f-4db8-88e0-46e0cdcc3004/crio-conmon-32da98c8522068be05a7510a3eddb09cad6ed2f03286180d0e931d0d0b6224a6",
	} {
		if got, ok := ParseCgroupPath(p); ok {
			t.Errorf("conmon %s parsed as %+v", p, got)
		}
	}
}

// Shapes of the systemd driver that testdata/cgroups/layouts.tsv has no
// recorded path of, from the source that makes them: a guaranteed pod's slice
// sits right under kubepods.slice (kubelet's pod container manager gives a
// guaranteed pod no QoS parent), and crun, under CRI-O, runs the container's
// process in a child "container" of the scope CRI-O expects it in (CRI-O's
// crunContainerCgroupManager). cmd/eaddr's TestSystemdDriverCgroups runs a
// process in each of these and traces it.
func TestParseCgroupSystemdShapes(t *testing.T) {
	const id = "32da98c8522068be05a7510a3eddb09cad6ed2f03286180d0e931d0d0b6224a6"
	for _, tc := range []struct {
		path string
		want CgroupPod
	}{
		{"/kubepods.slice/kubepods-pod207aaad1_659f_4db8_88e0_46e0cdcc3004.slice/cri-containerd-" + id + ".scope",
			CgroupPod{UID: "207aaad1-659f-4db8-88e0-46e0cdcc3004", QoS: "guaranteed", ContainerID: id, Runtime: "containerd"}},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod207aaad1_659f_4db8_88e0_46e0cdcc3004.slice/crio-" + id + ".scope/container",
			CgroupPod{UID: "207aaad1-659f-4db8-88e0-46e0cdcc3004", QoS: "burstable", ContainerID: id, Runtime: "cri-o"}},
	} {
		if got, ok := ParseCgroupPath(tc.path); !ok || got != tc.want {
			t.Errorf("%s:\n got %+v %v\nwant %+v", tc.path, got, ok, tc.want)
		}
	}
}

func FuzzParseCgroupPath(f *testing.F) {
	// Seeds: every real layout of testdata/cgroups/layouts.tsv, and oddities.
	if b, err := os.ReadFile("../../testdata/cgroups/layouts.tsv"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, _, ok := strings.Cut(line, "\t"); ok && !strings.HasPrefix(line, "#") {
				f.Add(p)
			}
		}
	}
	for _, s := range []string{
		"/kubepods/besteffort/pod4eede96e-e976-4573-bc90-68dfe2516d3b/c3cd4e0a7993a1c155cc1bdd3326c7b1e260226d0c2c79e3e48dbc360543c768",
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod03f3f104_3215_44f2_9686_d4dd1f05a7ed.slice/cri-containerd-09d185410c4e25236cc24717f881589bb0978b24eafd101624e627a4dd8d3439.scope",
		"/a:b:c", "pod", "-pod.slice", "::::", "/kubepods-pod.slice:cri-containerd:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		p, ok := ParseCgroupPath(path)
		if !ok {
			if p != (CgroupPod{}) {
				t.Fatalf("no pod but %+v", p)
			}
			return
		}
		if !validUID(p.UID) || (p.ContainerID != "" && (len(p.ContainerID) != 64 || !allHex(p.ContainerID))) {
			t.Fatalf("%q gave %+v", path, p)
		}
		switch p.QoS {
		case "guaranteed", "burstable", "besteffort":
		default:
			t.Fatalf("qos %q", p.QoS)
		}
	})
}
