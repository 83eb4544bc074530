package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// TestHoldPhrase: a fix names every holder found and never says one holds
// what several do, nor that they hold more than was seen (two nc clients
// with one connection each were once "pid 15834 (nc) holds 2 connections").
func TestHoldPhrase(t *testing.T) {
	nc := func(pid, n int) Holder { return Holder{PID: pid, Comm: "nc", Sockets: n} }
	for _, c := range []struct {
		hs   []Holder
		n    int
		want string
	}{
		{nil, 2, "a process that could not be found holds 2 connections"},
		{[]Holder{nc(7, 2)}, 2, "pid 7 (nc) holds 2 connections"},
		{[]Holder{nc(7, 1), nc(9, 1)}, 2, "pid 7 (nc) and pid 9 (nc) hold 2 connections"},
		{[]Holder{nc(7, 1), nc(9, 1), nc(11, 1)}, 3, "pid 7 (nc), pid 9 (nc) and pid 11 (nc) hold 3 connections"},
		{[]Holder{nc(7, 1)}, 2, "pid 7 (nc) holds 1 of the 2 connections"},
		{[]Holder{nc(7, 2), nc(9, 1)}, 5, "pid 7 (nc) and pid 9 (nc) hold 3 of the 5 connections"},
	} {
		if got := holdPhrase(c.hs, c.n, "connections"); got != c.want {
			t.Errorf("holdPhrase(%v, %d) = %q, want %q", c.hs, c.n, got, c.want)
		}
	}
}

// TestWiderRange: a wider range starts above the ports the netns serves on
// when that still gives at least half of what 1024-65535 gives with them
// reserved, else reserves them; never one no wider than now; the count is
// the ports the kernel then hands out.
func TestWiderRange(t *testing.T) {
	for _, c := range []struct {
		name     string
		lo, hi   int
		reserved []portmodel.Span
		served   []int
		want     string // settings as sysctl -w takes them, "" for none
		gets     int
	}{
		{"listener on 8080", 32768, 60999, nil, []int{8080}, `net.ipv4.ip_local_port_range="8082 65535"`, 57454},
		{"nothing served", 40000, 40001, nil, nil, `net.ipv4.ip_local_port_range="1024 65535"`, 64512},
		{"an odd highest port: the range starts even", 40000, 40009, nil, []int{9999}, `net.ipv4.ip_local_port_range="10000 65535"`, 55536},
		{"high listeners are reserved", 40000, 40009, nil, []int{8080, 50000, 53000}, `net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080,50000,53000`, 64509},
		{"a listener on 65535", 40000, 40009, nil, []int{65535}, `net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=65535`, 64511},
		{"reserved already: kept, not avoided", 40000, 40009, []portmodel.Span{{Lo: 50000, Hi: 50000}}, []int{8080, 50000}, `net.ipv4.ip_local_port_range="8082 65535"`, 57453},
		{"as wide as it goes", 1024, 65535, nil, nil, "", 0},
		{"as wide as it goes with a listener in it", 1024, 65535, nil, []int{8080}, "", 0},
	} {
		sc := portmodel.Sysctls{Lo: c.lo, Hi: c.hi, Reserved: c.reserved}
		plan, ok := widerRange(sc, c.served)
		if got := plan.set.args(); got != c.want || ok != (c.want != "") || plan.gets != c.gets {
			t.Errorf("%s: %q (ok %v) gives %d, want %q gives %d", c.name, got, ok, plan.gets, c.want, c.gets)
		}
		if ok && plan.gets != plan.set.ports(sc) {
			t.Errorf("%s: claims %d, the settings give %d", c.name, plan.gets, plan.set.ports(sc))
		}
	}
}

// TestOwnerForms: each owner applies the same settings its own way, and
// only a pod's form says "pod"; when eaddr cannot tell, it says so and why,
// and gives both.
func TestOwnerForms(t *testing.T) {
	set := portSettings{lo: 1024, hi: 65535, reserved: []portmodel.Span{{Lo: 8080, Hi: 8080}}, reserve: true}
	for _, c := range []struct {
		o    owner
		want string
	}{
		{owner{kind: ownerPod}, `spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}, {name: net.ipv4.ip_local_reserved_ports, value: "8080"}] (ip_local_reserved_ports there needs Kubernetes 1.27 or later)`},
		{owner{kind: ownerHost}, `sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080 (also in /etc/sysctl.d)`},
		{owner{kind: ownerOther, pid: 7}, `nsenter -t 7 -n sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080`},
		{owner{kind: ownerOther, pid: 7, mount: "/run/netns/blue"}, `ip netns exec blue sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080`},
		{owner{kind: ownerOther, mount: "/var/run/docker/netns/1a2b"}, `nsenter --net=/var/run/docker/netns/1a2b sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080`},
		{owner{kind: ownerUnknown, pid: 7, why: "because"}, `eaddr cannot tell whether it is a pod's netns (because): in a pod, spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}, {name: net.ipv4.ip_local_reserved_ports, value: "8080"}] (ip_local_reserved_ports there needs Kubernetes 1.27 or later); otherwise nsenter -t 7 -n sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080`},
	} {
		if got := c.o.command(set); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.o, got, c.want)
		}
		if strings.Contains(c.o.rangeName(), "pod's range") != (c.o.kind == ownerPod) {
			t.Errorf("%+v: %q", c.o, c.o.rangeName())
		}
	}
	// A mount path goes into a command only as it is safe to paste.
	for _, m := range []string{"/run/netns/a b", "/run/netns/$(reboot)", "/run/netns/x;y", "/run/netns/x\n", "run/netns/x", ""} {
		if shellSafe.MatchString(m) {
			t.Errorf("%q taken into a command", m)
		}
	}
}

// TestReserveLeavesPorts: a reserve that would take every port of the
// range is never advised, for the listeners of a failure or of check.
func TestReserveLeavesPorts(t *testing.T) {
	listen := func(port uint16) portmodel.Socket {
		return portmodel.Socket{Proto: portmodel.TCP, State: netdiag.StateListen, Local: netip.AddrPortFrom(netip.IPv4Unspecified(), port)}
	}
	p := &portScene{sc: portmodel.Sysctls{Lo: 40000, Hi: 40001}, socks: []portmodel.Socket{listen(40000), listen(40001)}, own: &owner{kind: ownerPod}}
	d := NewDiagnoser()
	if got := d.listenerFix(p, portGroup{cause: CauseListener, ports: 2, socks: []int{0, 1}}); got != "move the listeners on ports 40000, 40001 out of the range: reserving them would leave no port" {
		t.Errorf("listenerFix: %q", got)
	}
	if got := reserveListeners(p.sc, []int{40000, 40001}); got != "move them out of the range: reserving them would leave no port" {
		t.Errorf("check: %q", got)
	}
	p.sc.Hi = 40002
	if got := reserveListeners(p.sc, []int{40000, 40001}); !strings.Contains(got, "net.ipv4.ip_local_reserved_ports=40000-40001 (the list replaces the current one, leaving 1 port of the range usable)") {
		t.Errorf("check: %q", got)
	}
}

// TestCheckNodePortFix: check's finding for a host range inside the
// NodePort range leaves it ports (it once advised reserving 30000-32767,
// which took every one); outside the host netns it gives no fix; without
// the sockets it says what it could not check.
func TestCheckNodePortFix(t *testing.T) {
	sc := &netdiag.PortSysctls{RangeLo: 30100, RangeHi: 30109}
	p := &portScene{sc: portmodel.Sysctls{Lo: 30100, Hi: 30109}, served: []int{35000}}
	for _, c := range []struct {
		host bool
		p    *portScene
		want string
		not  string
	}{
		{true, p, `Fix: reserving the overlap 30100-30109 would leave no usable port: the range 30100-30109 lies inside the NodePort range 30000-32767: move the range instead: sysctl -w net.ipv4.ip_local_port_range="32768 60999" net.ipv4.ip_local_reserved_ports=35000 (also in /etc/sysctl.d) gives 28231 ports (now 10)`, "ip_local_reserved_ports=30"},
		{true, nil, "Fix: keep net.ipv4.ip_local_port_range clear of the NodePort range and of the node's listeners (eaddr could not list the sockets to check a range against them)", "ip_local_reserved_ports"},
		{false, p, "harmless outside the host network namespace", "Fix"},
	} {
		r := &NetNSReport{Host: c.host}
		fixes := func() []string { return nil }
		if c.p != nil {
			fixes = func() []string { return nodePortRangeFixes(c.p, 30000, 32767) }
		}
		auditRange(r, sc, fixes, AuditOptions{NodePortLo: 30000, NodePortHi: 32767, Findings: true})
		msg := ""
		for _, f := range r.Findings {
			if strings.Contains(f.Message, "NodePort") {
				msg = f.Message
			}
		}
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.not) {
			t.Errorf("host %v: %q\nwant %q, without %q", c.host, msg, c.want, c.not)
		}
	}
}
