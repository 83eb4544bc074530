package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
)

// TestRangeFixesApplied: every range and reserve fix, in each of its forms,
// is applied as printed to the netns it is for (applyFix), and the kernel
// then hands out as many ports as the fix says, none that the netns serves
// on (TCP listeners, UDP servers), none of the NodePort range on the node;
// each program that served binds its port again, even while the range
// around it is full, and serves.
func TestRangeFixesApplied(t *testing.T) {
	t.Run("demo: no pod, listener on 8080, range 40000-40001", func(t *testing.T) {
		f := newFixNetns(t, 40000, 40001, []served{{"tcp", 8080}}, 2)
		g := NewDiagnoser().Diagnose(f.event())
		fix := fixWith(t, g.Fix, "widen ")
		wantIn(t, fix, `widen this network namespace's range (it is no pod's): nsenter -t `, `sysctl -w net.ipv4.ip_local_port_range="8082 65535" gives 57454 ports (now 2): it starts above 8080`)
		applyFix(t, f, fix, viaEnter, 0, 0)
	})
	t.Run("not known whether a pod's", func(t *testing.T) {
		f := newFixNetns(t, 40000, 40001, []served{{"tcp", 8080}}, 2)
		d := NewDiagnoser()
		d.HostNetNS = 0
		fix := fixWith(t, d.Diagnose(f.event()).Fix, "widen ")
		wantIn(t, fix, "widen this network namespace's range: eaddr cannot tell whether it is a pod's netns (the node's own network namespace is not known",
			`in a pod, spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "8082 65535"}]; otherwise nsenter -t `)
		applyFix(t, f, fix, viaEnter, 0, 0)
	})
	t.Run("pod, listener on 8080, the kernel's default range", func(t *testing.T) {
		f := newFixNetns(t, 32768, 60999, []served{{"tcp", 8080}}, 0)
		intoPodCgroup(t, f.pid)
		fix := rangeFixOf(t, f)
		wantIn(t, fix, `widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "8082 65535"}] gives 57454 ports (now 28232)`)
		applyFix(t, f, fix, viaPod, 0, 0)
	})
	t.Run("pod, listeners high: the range starts low and reserves them", func(t *testing.T) {
		f := newFixNetns(t, 40000, 40009, []served{{"tcp", 8080}, {"tcp", 50000}, {"udp", 53000}}, 10)
		intoPodCgroup(t, f.pid)
		fix := fixWith(t, NewDiagnoser().Diagnose(f.event()).Fix, "widen ")
		wantIn(t, fix, `widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}, {name: net.ipv4.ip_local_reserved_ports, value: "8080,50000,53000"}] (ip_local_reserved_ports there needs Kubernetes 1.27 or later) gives 64509 ports (now 10)`)
		applyFix(t, f, fix, viaPod, 0, 0)
	})
	t.Run("listener inside the range", func(t *testing.T) {
		f := newFixNetns(t, 40000, 40009, []served{{"tcp", 8080}, {"tcp", 40005}}, 9)
		fixes := NewDiagnoser().Diagnose(f.event()).Fix
		reserve := fixWith(t, fixes, "move the listener on port 40005")
		wantIn(t, reserve, ` -n sysctl -w net.ipv4.ip_local_reserved_ports=40005 (leaving 9 ports of the range usable)`)
		applyFix(t, f, reserve, viaEnter, 0, 0)
		wide := fixWith(t, fixes, "widen ")
		wantIn(t, wide, `sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080,40005 gives 64510 ports (now 10)`)
		applyFix(t, f, wide, viaEnter, 0, 0)
	})
	t.Run("ip netns add: no process, a name", func(t *testing.T) {
		f := namedFixNetns(t, 40000, 40001, []served{{"tcp", 8080}}, 2)
		fix := fixWith(t, NewDiagnoser().Diagnose(f.event()).Fix, "widen ")
		wantIn(t, fix, `widen this network namespace's range (it is no pod's): ip netns exec eaddr-fix-`, ` sysctl -w net.ipv4.ip_local_port_range="8082 65535" gives 57454 ports (now 2)`)
		applyFix(t, f, fix, viaEnter, 0, 0)
	})
	t.Run("node, range 30100-30109 inside the NodePort range", testNodeRangeInsideNodePorts)
}

// testNodeRangeInsideNodePorts: a node (played by a netns) whose range lies
// inside the NodePort range and which listens on 35000: the range fix of
// an exhausted connect(), the NodePort fix of a timed-out one and check's
// finding each move the range out and reserve 35000, and leave ports.
func testNodeRangeInsideNodePorts(t *testing.T) {
	f := newFixNetns(t, 30100, 30109, []served{{"tcp", 8080}, {"tcp", 35000}}, 10)
	d := NewDiagnoser()
	d.HostNetNS = f.ns.Inode()
	wide := fixWith(t, d.Diagnose(f.event()).Fix, "widen the range")
	wantIn(t, wide, `sysctl -w net.ipv4.ip_local_port_range="32768 65535" net.ipv4.ip_local_reserved_ports=35000 (also in /etc/sysctl.d) gives 32767 ports (now 10); the reserve keeps the ports the node listens on inside it (35000)`)
	timedOut := f.event()
	timedOut.Errno = int(unix.ETIMEDOUT)
	timedOut.Remote.IP = netip.MustParseAddrPort("10.9.0.2:80")
	timedOut.Local = decode.Addr{Valid: true, Family: decode.AFInet, IP: netip.MustParseAddrPort("10.9.0.1:30105")}
	move := fixWith(t, d.Diagnose(timedOut).Fix, "move the range instead")
	wantIn(t, move, `would leave no usable port: the range 30100-30109 lies inside the NodePort range 30000-32767: move the range instead: sysctl -w net.ipv4.ip_local_port_range="32768 60999" net.ipv4.ip_local_reserved_ports=35000 (also in /etc/sysctl.d) gives 28231 ports (now 10)`)
	r := AuditNetNS(f.ns.Inode(), f.pid, AuditOptions{HostNetNS: f.ns.Inode(), NodePortLo: 30000, NodePortHi: 32767, Warn: 70, Crit: 90, Top: 3, Findings: true})
	var check string
	for _, x := range r.Findings {
		if strings.Contains(x.Message, "overlaps the NodePort range") {
			check = x.Message
		}
	}
	wantIn(t, check, "Fix: reserving the overlap 30100-30109 would leave no usable port", `move the range instead: sysctl -w net.ipv4.ip_local_port_range="32768 60999" net.ipv4.ip_local_reserved_ports=35000`)
	for _, fix := range []string{wide, move, check} {
		applyFix(t, f, fix, viaHost, 30000, 32767)
	}
}

// rangeFixOf is the range fix eaddr gives f's netns, read as a diagnosis
// reads it (a netns at the kernel's default range is not exhausted by the
// test: that would take 28,232 connections).
func rangeFixOf(t *testing.T, f *fixNetns) string {
	t.Helper()
	return rangeFixIn(t, NewDiagnoser(), f.ns.Inode(), f.pid)
}

func wantIn(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("no %q in %q", w, s)
		}
	}
}
