package containerd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// podIP is the pod's own address, as the runtime reports it.
func podIP(t *testing.T, r *critest.Runtime, pod *critest.Pod) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := r.RuntimeService.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod.ID})
	if err != nil || st.GetStatus().GetNetwork().GetIp() == "" {
		t.Fatalf("the pod's IP: %v %+v", err, st.GetStatus().GetNetwork())
	}
	return st.Status.Network.Ip
}

// TestNodePortProbedPod: the seed's second story, as the kubelet meets it,
// on a node played by a throwaway netns (--nodeport-netns) whose range lies
// inside the NodePort range. A process named kubelet there connects to a
// pod's address (the private containerd's pod; the netns has that address
// on its loopback, so the connection stays in it) from a NodePort source
// port: its nodeport_collision's diagnosis names the pod by that address
// (the runtime's fresh list), and with --kube-events the pod gets a Warning
// SourcePortInNodePortRange that says the kubelet's connection to it came
// from a NodePort. The same connect toward 127.0.0.1, no pod's address,
// names no pod and makes no Event.
func TestNodePortProbedPod(t *testing.T) {
	r := critest.Start(t)
	pod := r.RunPod(t, "web", "shop", nil, nil)
	ip := podIP(t, r, pod)
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "31000 31001"); err != nil {
		t.Fatal(err)
	}
	if _, out := eaddrtest.RunInNS(t, ns, "ip", "addr", "add", ip+"/32", "dev", "lo"); out != "" {
		t.Fatalf("ip addr add: %s", out)
	}
	for _, addr := range []string{ip + ":8080", "127.0.0.1:8080"} {
		l, err := ns.Listen("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	eaddrtest.Sandbox(t, ns) // the node's processes: the diagnosis reads the netns through one
	api := eaddrtest.NewEventsAPI(t)
	p := eaddrtest.StartTrace(t, "--nodeport-collisions", "--nodeport-netns", strconv.FormatUint(ns.Inode(), 10), "--cri-endpoint", r.Socket,
		"--kube-events", "--kubeconfig", eaddrtest.KubeconfigFor(t, api.Srv.URL, "test-token"), "--ports-interval", "0", "--kube-events-update-interval", "200ms")
	kubelet := filepath.Join(t.TempDir(), "kubelet") // its comm is the name it was run by
	if err := os.Symlink(eaddrtest.Python(t), kubelet); err != nil {
		t.Fatal(err)
	}
	probe := func(addr string) int {
		pid, out := eaddrtest.RunInNS(t, ns, kubelet, "-c", "import socket; socket.create_connection(('"+addr+"', 8080), timeout=5).close(); print('ok')")
		if strings.TrimSpace(out) != "ok" {
			t.Fatalf("connect to %s: %s", addr, out)
		}
		return pid
	}
	pid := probe(ip)
	evs := p.ForPID(pid, 1, 10*time.Second)
	if len(evs) != 1 || evs[0].Kind != "nodeport_collision" || evs[0].Diagnosis == nil {
		t.Fatalf("events %+v, want one diagnosed nodeport_collision", evs)
	}
	if rp := evs[0].Diagnosis.RemotePod; rp == nil || rp.UID != pod.UID || rp.Name != "web" || rp.Namespace != "shop" {
		t.Errorf("diagnosis.remote_pod %+v, want shop/web uid %s", rp, pod.UID)
	}
	got := eaddrtest.WaitEvents(t, api.Snapshot, func(evs []eaddrtest.APIEvent) bool { return len(evs) == 1 })[0]
	want := "the kubelet (pid " + strconv.Itoa(pid) + "), probing this pod or running its lifecycle hook, connected to it at " + ip + ":8080 from source port 3100"
	if got.Regarding.UID != pod.UID || got.Regarding.Name != "web" || got.Reason != "SourcePortInNodePortRange" || got.Type != "Warning" ||
		!strings.HasPrefix(got.Note, want) || !strings.Contains(got.Note, "inside the NodePort range 30000-32767") || !strings.Contains(got.Note, "eaddr found no NodePort rule for tcp/3100") ||
		!strings.Contains(got.Note, "Fix: ") {
		t.Errorf("Event %+v\nwant a Warning SourcePortInNodePortRange on shop/web whose note starts %q", got, want)
	}
	t.Logf("Event on %s/%s: %s: %s", got.Regarding.Namespace, got.Regarding.Name, got.Reason, got.Note)

	pid = probe("127.0.0.1")
	evs = p.ForPID(pid, 1, 10*time.Second)
	if len(evs) != 1 || evs[0].Diagnosis == nil || evs[0].Diagnosis.RemotePod != nil {
		t.Errorf("toward 127.0.0.1: %+v, want a diagnosis that names no pod", evs)
	}
	p.Sentinel(t, "bind")
	if n := len(api.Snapshot()); n != 1 {
		t.Errorf("%d Events after the connect toward 127.0.0.1, want still 1", n)
	}
}
