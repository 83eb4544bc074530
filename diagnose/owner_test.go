package diagnose

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// TestOwnerOfRealPod: a pod a real containerd runs, as a kubelet asks it
// through CRI (its sandbox process in the pod's cgroup, its netns mounted
// at /run/netns/cni-*), is a pod's netns, and the range fix for it says
// so, in the pod spec's words; a pod made with the sysctls the fix prints
// gets them from the runtime as printed. The node's netns is the host's,
// and a netns with only a process outside any pod is no pod's.
func TestOwnerOfRealPod(t *testing.T) {
	r := critest.Start(t)
	pod := r.RunPod(t, "client", "shop", nil, map[string]string{"net.ipv4.ip_local_port_range": "40000 40009"})
	ns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", pod.PausePID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	for _, port := range []string{"8080", "50000"} {
		l, err := ns.Listen("tcp4", "0.0.0.0:"+port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	d := NewDiagnoser()
	fix := rangeFixIn(t, d, ns.Inode(), pod.PausePID)
	wantIn(t, fix, `widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}, {name: net.ipv4.ip_local_reserved_ports, value: "8080,50000"}]`)

	set := map[string]string{}
	for _, m := range podSysctlRe.FindAllStringSubmatch(fix, -1) {
		set[m[1]] = m[2]
	}
	fixed := r.RunPod(t, "client-fixed", "shop", nil, set)
	fns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", fixed.PausePID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fns.Close() })
	for name, v := range set {
		if got, err := fns.Sysctl(name); err != nil || strings.Join(strings.Fields(got), " ") != v {
			t.Errorf("the runtime made the pod with %s=%q (%v), the fix printed %q", name, got, err, v)
		}
	}

	if o := ownerIn(t, d, d.HostNetNS, 1, 2); o.kind != ownerHost {
		t.Errorf("the node's netns: %+v, want the host's", o)
	}
	plain := testns.New(t)
	if o := ownerIn(t, d, plain.Inode(), startIn(t, plain)); o.kind != ownerOther || o.pid == 0 {
		t.Errorf("a netns with a sleep in it: %+v, want no pod's, with its pid", o)
	}
}

// rangeFixIn is the range fix for the netns inode, read through pid.
func rangeFixIn(t *testing.T, d *Diagnoser, inode uint64, pid int) string {
	t.Helper()
	n, err := netdiag.OpenNetns(inode, pid)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p, err := readPorts(n, nil, false, focus{all: true})
	if err != nil {
		t.Fatal(err)
	}
	return d.rangeFix(p)
}

// ownerIn is whose the netns inode is, read through pids.
func ownerIn(t *testing.T, d *Diagnoser, inode uint64, pids ...int) owner {
	t.Helper()
	n, err := netdiag.OpenNetns(inode, pids...)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	return d.ownerOf(n, nil)
}
