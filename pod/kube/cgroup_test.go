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
	// CRI-O's conmon is not a container.
	got, ok = ParseCgroupPath("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2ca4a155_3599_498d_bb9d_4446693fa3ea.slice/crio-conmon-0ba8ac17e4e7a31fb82279503552fe94e64bab4745bf6fd2ff231e7c8ca8bed0.scope")
	if !ok || got.ContainerID != "" {
		t.Errorf("conmon: %+v %v", got, ok)
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
