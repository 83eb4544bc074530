package kernel

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// nodePortNS is the seed's node, in a throwaway netns: ip_local_port_range
// 30100-30109, inside the NodePort range, and an nftables rule that, like
// kube-proxy's NodePort rule, takes every incoming SYN-ACK to a port of
// 30000-32767 (here it drops it, after adding its source and destination
// ports to the set "seen": the destination is the source port the connect
// really used). Listeners on 127.0.0.1:8080 and 8081 answer every SYN (and
// go on retransmitting SYN-ACKs after the client gave up: one port per
// subtest); with net.ipv4.tcp_syn_retries=1 the connect gives up with
// ETIMEDOUT after its retransmission.
func nodePortNS(t *testing.T) *netns.NS {
	t.Helper()
	nft := testenv.Program(t, "nft", "nftables")
	ns := testns.New(t)
	for k, v := range map[string]string{"net.ipv4.ip_local_port_range": "30100 30109", "net.ipv4.tcp_syn_retries": "1"} {
		if err := ns.SetSysctl(k, v); err != nil {
			t.Fatal(err)
		}
	}
	rules := `table inet eaddr_nodeport {
	set seen { type inet_service . inet_service; flags dynamic; }
	chain in { type filter hook input priority 0; tcp dport 30000-32767 tcp flags & (syn | ack) == syn | ack add @seen { tcp sport . tcp dport } drop; }
}`
	if out, _, err := eaddrtest.RunIn(context.Background(), ns, []string{"sh", "-c", nft + " -f - <<'EOF'\n" + rules + "\nEOF"}); err != nil || out != "" {
		t.Fatalf("nft: %v %s", err, out)
	}
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:8081"} {
		l, err := ns.Listen("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	eaddrtest.Sandbox(t, ns) // the host's processes: the diagnosis reads the netns through one
	return ns
}

var seenPair = regexp.MustCompile(`(\d+) \. (\d+)`)

// takenPorts lists the ports to which the rule took SYN-ACKs from server
// port from.
func takenPorts(t *testing.T, ns *netns.NS, from int) []int {
	t.Helper()
	out, _, err := eaddrtest.RunIn(context.Background(), ns, []string{"nft", "list", "set", "inet", "eaddr_nodeport", "seen"})
	if err != nil {
		t.Fatalf("nft list set: %v %s", err, out)
	}
	var ports []int
	for _, m := range seenPair.FindAllStringSubmatch(out, -1) {
		if m[1] == strconv.Itoa(from) {
			p, _ := strconv.Atoi(m[2])
			ports = append(ports, p)
		}
	}
	return ports
}

// The seed's failure, end to end: a blocking connect (python3) and a
// non-blocking one (curl) from a NodePort source port whose SYN-ACK a
// NodePort-like rule takes time out. Each event has the source port the
// rule saw (released by the kernel: local_released), a socket cookie, and
// (the scratch netns playing the host, --nodeport-netns) the diagnosis
// that the reply was likely taken by a NodePort rule, with the fix checked
// against 30100-30109: reserving it would leave no port, so move the
// range. curl's nodeport_collision and its later ETIMEDOUT share the cookie.
func TestNodePortTimeout(t *testing.T) {
	testenv.RequireRoot(t)
	py := eaddrtest.Python(t)
	curl := testenv.Program(t, "curl", "curl")
	ns := nodePortNS(t)
	inode := strconv.FormatUint(ns.Inode(), 10)
	// --diagnose-wait 1m: a busy machine or a TCG guest takes longer than 300 ms for the snapshot
	p := eaddrtest.StartTrace(t, "--errno", "ETIMEDOUT", "--nodeport-collisions", "--nodeport-netns", inode, "--diagnose-wait", "1m")
	t.Cleanup(func() {
		if t.Failed() { // once a blocking connect's released port was not found: was a program run skipped?
			t.Logf("eaddr's totals at the failure (runs_skipped: runs of its programs the kernel skipped): %v", p.Stop(t))
		}
	})

	t.Run("blocking", func(t *testing.T) {
		pid, out := eaddrtest.RunInNS(t, ns, py, "-c", `import socket
s = socket.socket()
try:
    s.connect(("127.0.0.1", 8080))
except OSError as e:
    print(e)
`)
		evs := p.ForPID(pid, 1, 10*time.Second)
		taken := takenPorts(t, ns, 8080)
		if len(evs) != 1 || len(taken) != 1 {
			t.Fatalf("%d events %+v, SYN-ACKs taken to ports %v; want 1 and 1 (python printed %q)", len(evs), evs, taken, out)
		}
		ev := evs[0]
		checkNodePortTimeout(t, ev, taken[0])
		if ev.Async {
			t.Errorf("a blocking connect's failure is not async")
		}
	})

	t.Run("curl", func(t *testing.T) {
		pid, out := eaddrtest.RunInNS(t, ns, curl, "-sS", "--connect-timeout", "20", "http://127.0.0.1:8081/")
		evs := p.ForPID(pid, 2, 10*time.Second)
		taken := takenPorts(t, ns, 8081)
		if len(evs) != 2 || len(taken) != 1 {
			t.Fatalf("%d events %+v, SYN-ACKs taken to ports %v; want 2 and 1 (curl printed %q)", len(evs), evs, taken, out)
		}
		collision, failure := evs[0], evs[1]
		if collision.Kind != "nodeport_collision" || collision.Local == nil || collision.Local.Port != taken[0] || collision.LocalReleased {
			t.Errorf("first event %+v local %+v, want the nodeport_collision from port %d", collision, collision.Local, taken[0])
		}
		checkNodePortTimeout(t, failure, taken[0])
		if !failure.Async {
			t.Errorf("curl's failure is not async")
		}
		if collision.Socket.Cookie == 0 || collision.Socket.Cookie != failure.Socket.Cookie {
			t.Errorf("cookies %d (collision) and %d (failure): want the same socket's", collision.Socket.Cookie, failure.Socket.Cookie)
		}
	})
}

func checkNodePortTimeout(t *testing.T, ev eaddrtest.JSONEvent, port int) {
	t.Helper()
	if ev.Kind != "failure" || ev.Errno != "ETIMEDOUT" || ev.Local == nil || ev.Local.IP != "127.0.0.1" || ev.Local.Port != port || !ev.LocalReleased {
		t.Errorf("%s %s local %+v released %v, want ETIMEDOUT from 127.0.0.1:%d, released", ev.Kind, ev.Errno, ev.Local, ev.LocalReleased, port)
	}
	if ev.Socket.Cookie == 0 {
		t.Errorf("no socket cookie")
	}
	g := ev.Diagnosis
	if g == nil {
		t.Fatalf("no diagnosis")
	}
	want := "source port " + strconv.Itoa(port) + " is inside the NodePort range 30000-32767 in the host network namespace: the reply (SYN-ACK) to it was likely taken by a NodePort rule"
	if !strings.Contains(g.Verdict, want) || !strings.Contains(g.Verdict, "likely, not certain") {
		t.Errorf("verdict %q, want %q", g.Verdict, want)
	}
	if len(g.Fix) != 1 || !strings.Contains(g.Fix[0], "would leave no usable port") || !strings.Contains(g.Fix[0], `ip_local_port_range="32768 60999"`) || g.PortRange != "30100-30109" {
		t.Errorf("fix %q for range %s: want moving the range, checked", g.Fix, g.PortRange)
	}
	if ev.Explain == nil || strings.Contains(ev.Explain.Meaning, "the destination or the path") || !strings.Contains(ev.Explain.Meaning, "NodePort rule") {
		t.Errorf("explain %+v: the meaning blames the destination", ev.Explain)
	}
}
