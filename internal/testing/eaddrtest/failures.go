package eaddrtest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// Exhausted returns a fresh netns whose two-port range is held by two
// connections to host:8080. Everything is removed when the test ends.
func Exhausted(t *testing.T, network, host string) *netns.NS {
	t.Helper()
	ns := testns.New(t)
	ex, err := netns.Exhaust(ns, network, net.JoinHostPort(host, "8080"), 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ns
}

// RunInNS runs argv in ns and returns its pid and combined output.
func RunInNS(t *testing.T, ns *netns.NS, argv ...string) (int, string) {
	t.Helper()
	out, pid, err := RunIn(context.Background(), ns, argv)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return pid, out
}

func Python(t *testing.T) string {
	t.Helper()
	p := demo.Python3()
	if p == "" {
		testenv.Missing(t, "python3", "python3")
	}
	return p
}

// CheckPrediction: the line eaddr predicts for the event is a line the
// client really printed (a template's <...> parts match anything), and the
// binary was classified right. A client eaddr has no wording for must say
// "unknown" and give an errno text the client really printed.
func CheckPrediction(t *testing.T, cl demo.Client, ev JSONEvent, printed string) {
	t.Helper()
	if ev.Explain == nil {
		t.Errorf("event has no explain object")
		return
	}
	x := ev.Explain
	if x.Meaning == "" {
		t.Errorf("explain lacks the meaning: %+v", x)
	}
	if cl.Libc != "" && x.Libc != cl.Libc {
		t.Errorf("libc %q, want %q", x.Libc, cl.Libc)
	}
	t.Logf("%s: eaddr predicted %q (%s, %s, %s), grep %q", cl.Name, x.ClientMessage, x.Client, x.Confidence, x.Libc, x.Grep)
	if cl.Unknown {
		if x.Client != "unknown" || x.ClientMessage != "" || x.ClientUnknown == "" {
			t.Errorf("%s: want client \"unknown\" with a reason and no line, got %+v", cl.Name, x)
		}
		for _, g := range x.Grep {
			if strings.Contains(printed, g) {
				return
			}
		}
		t.Errorf("%s printed\n%s\nwhich has none of eaddr's grep texts %q", cl.Name, printed, x.Grep)
		return
	}
	for _, line := range strings.Split(printed, "\n") {
		if x.ClientMessage != "" && JudgeWording(x.ClientMessage, line) == "exact" {
			return
		}
	}
	t.Errorf("%s (%s, %s) printed\n%s\neaddr predicted\n%s", cl.Name, x.Client, x.Libc, printed, x.ClientMessage)
}

// ClosedPort returns a loopback TCP port of the host netns that nothing
// listens on: it was bound and released again.
func ClosedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// BlackholeNS returns a fresh netns in which a SYN to 10.9.0.2:80 goes out
// on a veth to a MAC nobody has (a permanent neighbour entry), so it is
// dropped without an answer; net.ipv4.tcp_syn_retries=1 makes the kernel
// give up with ETIMEDOUT after about 3 s. Nothing leaves the netns.
func BlackholeNS(t *testing.T) *netns.NS {
	t.Helper()
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.tcp_syn_retries", "1"); err != nil {
		t.Fatal(err)
	}
	script := "ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up && " +
		"ip addr add 10.9.0.1/24 dev v0 && ip neigh add 10.9.0.2 lladdr 02:00:00:00:00:01 dev v0 nud permanent"
	if out, _, err := RunIn(context.Background(), ns, []string{"sh", "-c", script}); err != nil || out != "" {
		t.Fatalf("setting up the blackhole: %v %s", err, out)
	}
	return ns
}

// Sandbox starts a process that lives in ns for the test, as a pod's pause
// process keeps its netns: the netns stays reachable when clients exit.
func Sandbox(t *testing.T, ns *netns.NS) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

func FailConnect(t *testing.T, ns *netns.NS, host string) int {
	t.Helper()
	pid, _ := RunInNS(t, ns, Python(t), "-c", fmt.Sprintf(`import socket
try:
    socket.socket().connect((%q, 8080))
except OSError as e:
    print(e)
`, host))
	return pid
}
