package diagnose

import (
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// portSettings are the port sysctls a fix sets, as values: the fix's words
// are rendered from them (owner.command), and the tests apply what those
// words print to a real netns and ask the kernel what it then hands out.
type portSettings struct {
	lo, hi   int              // net.ipv4.ip_local_port_range; lo 0: left as it is
	reserved []portmodel.Span // net.ipv4.ip_local_reserved_ports, the whole list: it replaces the one in effect
	reserve  bool             // the fix sets ip_local_reserved_ports
}

// with is sc once s is applied.
func (s portSettings) with(sc portmodel.Sysctls) portmodel.Sysctls {
	if s.lo != 0 {
		sc.Lo, sc.Hi = s.lo, s.hi
	}
	if s.reserve {
		sc.Reserved = s.reserved
	}
	return sc
}

// ports is how many ports the kernel hands out once s is applied to sc:
// those of the range that are not reserved. The ranges eaddr advises
// start even and end odd, so connect() tries every one of them (the
// even-count cut, portmodel.Tried).
func (s portSettings) ports(sc portmodel.Sysctls) int {
	n := s.with(sc)
	return n.Unreserved(n.Lo, n.Hi)
}

// args are the settings as sysctl(8) takes them:
// net.ipv4.ip_local_port_range="8082 65535" net.ipv4.ip_local_reserved_ports=8080.
func (s portSettings) args() string {
	out := ""
	if s.lo != 0 {
		out = fmt.Sprintf(`net.ipv4.ip_local_port_range="%d %d"`, s.lo, s.hi)
	}
	if s.reserve {
		if out != "" {
			out += " "
		}
		out += "net.ipv4.ip_local_reserved_ports=" + spansString(s.reserved)
	}
	return out
}

// podSysctls are the settings as a pod spec's securityContext.sysctls.
func (s portSettings) podSysctls() string {
	out := "["
	if s.lo != 0 {
		out += fmt.Sprintf(`{name: net.ipv4.ip_local_port_range, value: "%d %d"}`, s.lo, s.hi)
	}
	if s.reserve {
		if out != "[" {
			out += ", "
		}
		out += `{name: net.ipv4.ip_local_reserved_ports, value: "` + spansString(s.reserved) + `"}`
	}
	return out + "]"
}

// command is how the owner of the netns applies s.
//
// A pod's sysctls are set by the kubelet when it makes the pod's netns:
// net.ipv4.ip_local_port_range is a safe sysctl in every Kubernetes,
// net.ipv4.ip_local_reserved_ports since 1.27 (the kubelet's list,
// pkg/kubelet/sysctl/safe_sysctls.go: absent in v1.26.0, present in
// v1.27.0; Pod Security's baseline, sysctlsAllowedV1Dot27), on kernels
// where it is per netns (3.16 and later).
func (o owner) command(s portSettings) string {
	pod := "spec.securityContext.sysctls: " + s.podSysctls()
	if s.reserve {
		pod += " (ip_local_reserved_ports there needs Kubernetes 1.27 or later)"
	}
	switch o.kind {
	case ownerPod:
		return pod
	case ownerHost:
		return "sysctl -w " + s.args() + " (also in /etc/sysctl.d)"
	case ownerOther:
		return o.enter() + "sysctl -w " + s.args()
	}
	return fmt.Sprintf("eaddr cannot tell whether it is a pod's netns (%s): in a pod, %s; otherwise %ssysctl -w %s", o.why, pod, o.enter(), s.args())
}

// enter is the command that runs the next one inside the netns: by its
// name when `ip netns add` made it (a name outlives any process), else
// through a process in it, else through its mount.
func (o owner) enter() string {
	switch {
	case path.Dir(o.mount) == netdiag.RunNetNS:
		return "ip netns exec " + path.Base(o.mount) + " "
	case o.pid > 0:
		return fmt.Sprintf("nsenter -t %d -n ", o.pid)
	case o.mount != "":
		return "nsenter --net=" + o.mount + " "
	}
	return "inside it (eaddr found no process or mount to enter it by): "
}

// rangeName names the netns's range in a fix: "the pod's range", "the
// node's range", "this network namespace's range (it is no pod's)".
func (o owner) rangeName() string {
	switch o.kind {
	case ownerPod:
		return "the pod's range"
	case ownerHost:
		return "the node's range"
	case ownerOther:
		return "this network namespace's range (it is no pod's)"
	}
	return "this network namespace's range"
}

// withPorts is the reserved list with each of ports added, merged.
func withPorts(spans []portmodel.Span, ports []int) []portmodel.Span {
	out := slices.Clone(spans)
	for _, p := range ports {
		out = append(out, portmodel.Span{Lo: p, Hi: p})
	}
	return mergeSpans(out)
}

// mergeSpans sorts spans and joins the overlapping and adjacent ones.
func mergeSpans(spans []portmodel.Span) []portmodel.Span {
	sort.Slice(spans, func(i, j int) bool { return spans[i].Lo < spans[j].Lo })
	var out []portmodel.Span
	for _, s := range spans {
		if n := len(out); n > 0 && s.Lo <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, s.Hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// portCount: "1 port", "9 ports".
func portCount(n int) string {
	if n == 1 {
		return "1 port"
	}
	return fmt.Sprintf("%d ports", n)
}
