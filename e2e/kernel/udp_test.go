package kernel

import (
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// udpExhaustScript binds UDP sockets on both ports of the netns's range,
// then fails a UDP connect() (autobind: EAGAIN), a UDP bind() to port 0
// (EADDRINUSE) and a non-blocking unix connect() to a full backlog
// (EAGAIN), and prints each errno.
const udpExhaustScript = `import os, socket
held = []
for port in (40000, 40001):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    held.append(s)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.connect(("127.0.0.1", 9))
    print("udp connect: 0")
except OSError as e:
    print("udp connect:", e.errno)
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    b.bind(("0.0.0.0", 0))
    print("udp bind: 0")
except OSError as e:
    print("udp bind:", e.errno)
name = "\0eaddr-udp-test-%d" % os.getpid()
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(name)
l.listen(0)
err = 0
for i in range(8):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setblocking(False)
    held.append(c)
    try:
        c.connect(name)
    except OSError as e:
        err = e.errno
        break
print("unix connect:", err)
`

// UDP port exhaustion is reported with the default flags: a UDP connect()
// whose autobind finds no free port (EAGAIN) and a UDP bind() to port 0
// (EADDRINUSE), each with the UDP meaning. A unix socket's EAGAIN (a full
// backlog) is not reported by default, only when asked for.
func TestUDPExhaustionByDefault(t *testing.T) {
	testenv.RequireRoot(t)
	py := eaddrtest.Python(t)
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "40000 40001"); err != nil {
		t.Fatal(err)
	}
	def := eaddrtest.StartTrace(t)
	asked := eaddrtest.StartTrace(t, "--errno", "EAGAIN,EADDRNOTAVAIL") // EADDRNOTAVAIL: the sentinel
	pid, out := eaddrtest.RunInNS(t, ns, py, "-c", udpExhaustScript)
	for _, want := range []string{"udp connect: 11", "udp bind: 98", "unix connect: 11"} {
		if !strings.Contains(out, want) {
			t.Fatalf("python printed %q, want %q: the kernel did not fail as the test needs", out, want)
		}
	}
	// python's events may still wait for its binary's analysis when this
	// test's own sentinel is written (seen: the unix EAGAIN missing from
	// asked, beside two busy loops)
	def.SentinelPastHolds(t, "bind")
	asked.SentinelPastHolds(t, "bind")

	var udpConnect, udpBind int
	for _, ev := range def.ForPID(pid, 0, 0) {
		meaning := ""
		if ev.Explain != nil {
			meaning = ev.Explain.Meaning
		}
		switch {
		case ev.Socket.Family == "unix":
			t.Errorf("default flags reported a unix socket's %s %s", ev.Syscall, ev.Errno)
		case ev.Syscall == "connect" && ev.Errno == "EAGAIN" && ev.Socket.Protocol == "udp":
			udpConnect++
			if !strings.Contains(meaning, "UDP socket's autobind") {
				t.Errorf("UDP connect EAGAIN: meaning %q, want the UDP autobind one", meaning)
			}
		case ev.Syscall == "bind" && ev.Errno == "EADDRINUSE" && ev.Socket.Protocol == "udp":
			udpBind++
			if !strings.Contains(meaning, "udp_lib_get_port") || ev.Local == nil || ev.Local.Port != 0 {
				t.Errorf("UDP bind(0) EADDRINUSE: meaning %q, local %+v; want the UDP meaning and port 0", meaning, ev.Local)
			}
		default:
			t.Errorf("unexpected event %s %s on a %s/%s socket", ev.Syscall, ev.Errno, ev.Socket.Family, ev.Socket.Protocol)
		}
	}
	if udpConnect != 1 || udpBind != 1 {
		t.Errorf("default flags: %d UDP connect EAGAIN and %d UDP bind EADDRINUSE events, want 1 and 1", udpConnect, udpBind)
	}

	// The unix EAGAIN happened, and is reported when asked for, with the
	// unix meaning: the default left it out for its protocol.
	unixSeen := false
	for _, ev := range asked.ForPID(pid, 0, 0) {
		if ev.Socket.Family == "unix" && ev.Errno == "EAGAIN" {
			unixSeen = true
			if ev.Explain == nil || !strings.Contains(ev.Explain.Meaning, "backlog is full") {
				t.Errorf("unix connect EAGAIN: explain %+v, want the backlog meaning", ev.Explain)
			}
		}
	}
	if !unixSeen {
		t.Errorf("--errno EAGAIN,EADDRNOTAVAIL: the unix connect EAGAIN was not reported")
	}
}
