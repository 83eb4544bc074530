package containerd

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// With a real containerd over CRI and eaddr already tracing, three pods are
// started, each with a container exec'd into at once: every event carries the
// right pod name, namespace, container name, container ID and image, though
// the runtime was asked about the container only when its first failure came.
func TestAttributionExecRightAfterStart(t *testing.T) {
	r := critest.Start(t)
	// A names wait of a minute: the runtime is asked about each container
	// at its first failure, and how fast it answers is the machine's.
	p := eaddrtest.StartTrace(t, "--cri-endpoint", r.Socket, "--comm", "wget", "--explain", "off", "--diagnose=false", "--names-wait", "1m")
	// The pods' netns do not exist yet, so nothing can be filtered in the
	// kernel: this trace sees every failure on the node, and a busy node's may
	// overrun its ring. What this test checks arrives or fails it below.
	p.LossOK = true
	for i := range 3 {
		name, cname := fmt.Sprintf("fresh-%d", i), fmt.Sprintf("app-%d", i)
		pod := r.RunPod(t, name, "shop", map[string]string{"try": strconv.Itoa(i)},
			map[string]string{"net.ipv4.ip_local_port_range": "40000 40001"})
		ns, err := netns.Open(fmt.Sprintf("/proc/%d/ns/net", pod.PausePID))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		app := r.StartContainer(t, pod, cname, "sleep", "3600")
		start := time.Now()
		out, code := r.Exec(t, app, 20*time.Second, "wget", "-O", "/dev/null", "http://127.0.0.1:8080/")
		if code == 0 {
			t.Fatalf("wget succeeded in an exhausted pod: %s", out)
		}
		ev := p.WaitFor(t, 90*time.Second, func(e eaddrtest.JSONEvent) bool {
			return e.Pod != nil && e.Pod.UID == pod.UID && e.Errno == "EADDRNOTAVAIL"
		})
		if ev.Pod.Name != name || ev.Pod.Namespace != "shop" || ev.Pod.Container != cname || ev.Pod.ContainerID != app.ID ||
			!strings.Contains(ev.Pod.Image, "eaddr-busybox") || ev.Pod.Labels["try"] != strconv.Itoa(i) || ev.Pod.NamesUnresolved != "" {
			t.Errorf("try %d: pod %+v; want %s/shop container %s id %s", i, ev.Pod, name, cname, app.ID)
		}
		t.Logf("try %d: container started and exec'd, event named in %v", i, time.Since(start).Round(time.Millisecond))
	}
}
