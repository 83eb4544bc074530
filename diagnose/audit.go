package diagnose

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/eaddr/eaddr/diagnose/netdiag"
)

// Severity of a finding; the worst one sets the exit status. SevUnknown:
// the netns could not be audited (or only in part), so eaddr cannot call
// it clean; it ranks above SevInfo, which is clean, and below a warning,
// a problem found for certain.
type Severity int

const (
	SevOK Severity = iota
	SevInfo
	SevUnknown
	SevWarning
	SevCritical
)

var severityNames = [...]string{"ok", "info", "unknown", "warning", "critical"}

func (s Severity) String() string { return severityNames[s] }

func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *Severity) UnmarshalText(b []byte) error {
	for i, name := range severityNames {
		if string(b) == name {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("unknown Severity %q", b)
}

// Finding is one thing check found in a netns.
type Finding struct {
	Severity Severity `json:"Severity"`
	Message  string   `json:"message"`
}

// Destination is how many ports a netns holds toward one remote address.
type Destination struct {
	Remote  string `json:"remote"`
	Ports   int    `json:"ports"`   // ports a connect() toward it could not have now (the port model): Toward + HeldForAll
	Percent int    `json:"percent"` // of the ports the kernel tries
	// Toward is the ports held toward it (their 4-tuple is taken),
	// HeldForAll those no connect() can have, whatever the destination.
	Toward     int  `json:"held_toward"`
	HeldForAll int  `json:"held_for_all"`
	Unsure     int  `json:"unsure,omitempty"` // more ports whose bind bucket could not be read
	Exhausted  bool `json:"exhausted,omitempty"`
	// Tried is the ports the kernel tries toward it, Percent's whole
	// (eaddr top's ports left: Tried - Ports - Unsure).
	Tried int `json:"tried"`
	// Culprit is who holds its ports and the fix, for a destination at
	// --warn or above (Diagnoser.Culprits; Looked); empty for the others.
	Culprit
}

// NetNSReport is check's audit of one network namespace.
type NetNSReport struct {
	Inode uint64 `json:"inode"`
	// PID is the process the audit entered the netns through (any
	// process in it, none of its holders by that), Comm its name; 0 for a
	// netns with no process, entered through its Mount.
	PID  int    `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
	// Mount is where the netns is mounted (ip netns add: /run/netns/NAME),
	// whether or not a process is in it.
	Mount            string        `json:"mount,omitempty"`
	Host             bool          `json:"host_network"`
	Pod              *CheckPod     `json:"pod,omitempty"`
	PortRange        string        `json:"port_range,omitempty"`
	Reserved         string        `json:"reserved_ports,omitempty"`
	UnprivilegedPort int           `json:"unprivileged_port_start,omitempty"`
	Usable           int           `json:"usable_ports,omitempty"`
	InUse            int           `json:"ports_in_use"`
	HeldForAll       int           `json:"held_for_all"`     // ports no connect() can have, whatever the destination
	Unsure           int           `json:"unsure,omitempty"` // ports whose bind bucket could not be read
	Source           string        `json:"sockets_from,omitempty"`
	Destinations     []Destination `json:"top_destinations,omitempty"`
	Listeners        []string      `json:"listeners_in_range,omitempty"`
	Findings         []Finding     `json:"findings,omitempty"`
	Worst            Severity      `json:"worst"`
	Error            string        `json:"error,omitempty"`
}

// CheckPod names the pod that owns a netns.
type CheckPod struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
}

// CheckReport is `eaddr check`'s report (its JSON form: AppendCheckReport).
type CheckReport struct {
	NodePortRange string        `json:"node_port_range"`
	NetNS         []NetNSReport `json:"netns"`
	Worst         Severity      `json:"worst"`
}

// Add records a finding; the worst one is the netns's.
func (r *NetNSReport) Add(s Severity, format string, a ...any) {
	r.Findings = append(r.Findings, Finding{s, fmt.Sprintf(format, a...)})
	if s > r.Worst {
		r.Worst = s
	}
}

// NetNSMembers maps each netns inode to a live process in it.
func NetNSMembers() (map[uint64]int, error) {
	out := map[uint64]int{}
	err := eachProcNetNS(func(pid int, ino uint64, err error) bool {
		if err != nil {
			return true
		}
		// Prefer a user process to a kernel thread (empty cmdline) as the
		// netns's representative: it is what a person recognises.
		if prev, ok := out[ino]; !ok || (isKernelThread(prev) && !isKernelThread(pid)) {
			out[ino] = pid
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func isKernelThread(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && len(b) == 0
}

// AuditOptions are check's thresholds.
type AuditOptions struct {
	HostNetNS              uint64
	NodePortLo, NodePortHi int
	Warn, Crit             int                  // percent of the usable range toward one destination
	Top                    int                  // destinations listed
	Iter                   netdiag.SocketReader // the BPF socket iterator; nil: sock_diag only
	// Open enters the netns (nil: netdiag.OpenNetns); tests make it fail
	// as when the last process in the netns exits before it is entered.
	Open func(inode uint64, pid int) (*netdiag.Netns, error)
}

// AuditNetNS reads one netns through pid (or another process in it) and
// reports its port range, budget and findings: what `eaddr check` prints.
func AuditNetNS(inode uint64, pid int, o AuditOptions) NetNSReport {
	r := NetNSReport{Inode: inode, PID: pid, Host: inode == o.HostNetNS}
	open := o.Open
	if open == nil {
		open = func(inode uint64, pid int) (*netdiag.Netns, error) { return netdiag.OpenNetns(inode, pid) }
	}
	ns, err := open(inode, pid)
	if err != nil {
		r.Error = err.Error()
		r.Add(SevUnknown, "not audited: cannot enter the network namespace: %v", err)
		return r
	}
	defer ns.Close()
	r.PID = ns.PID()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", r.PID)); err == nil {
		r.Comm = strings.TrimSpace(string(b))
	}
	sc, err := ns.Sysctls()
	if err != nil {
		r.Error = err.Error()
		r.Add(SevUnknown, "not audited: cannot read the port sysctls: %v", err)
		return r
	}
	p, err := readPorts(ns, o.Iter, false)
	auditRange(&r, &sc, p, o.NodePortLo, o.NodePortHi)
	if r.Host {
		auditMasquerade(&r, readMasqState(ns), o.NodePortLo, o.NodePortHi) // auditmasq.go
	}
	if err != nil {
		r.Error = err.Error()
		r.Add(SevUnknown, "ports in use not known: cannot list the sockets: %v", err)
		return r
	}
	auditPorts(&r, p, o)
	auditBudget(&r, p, o)
	return r
}

// auditRange: the range's shape, and its overlap with the NodePort range,
// with the host's fixes checked against its sockets (p; nil when they
// could not be listed).
func auditRange(r *NetNSReport, sc *netdiag.PortSysctls, p *portScene, npLo, npHi int) {
	r.PortRange = fmt.Sprintf("%d-%d", sc.RangeLo, sc.RangeHi)
	r.Reserved = netdiag.FormatSpans(sc.Reserved)
	r.UnprivilegedPort = sc.UnprivilegedStart
	r.Usable = sc.Usable()
	if sc.RangeLo%2 == sc.RangeHi%2 {
		r.Add(SevInfo, "ip_local_port_range %d %d: ip-sysctl.txt advises numbers of different parity (one even, one odd), as in the default 32768 60999", sc.RangeLo, sc.RangeHi)
	}
	if sc.RangeLo < sc.UnprivilegedStart {
		r.Add(SevInfo, "the range starts at %d, below ip_unprivileged_port_start %d: outgoing connections can take privileged ports that a service expects to bind", sc.RangeLo, sc.UnprivilegedStart)
	}
	// NodePorts live in the host's netns: there, a source port taken from
	// the NodePort range breaks replies to that connection. Elsewhere it
	// is harmless, and no fix is offered for it.
	overlap := NodePortOverlap(sc, npLo, npHi)
	switch {
	case overlap == 0:
	case !r.Host:
		r.Add(SevInfo, "ip_local_port_range %d-%d overlaps the NodePort range %d-%d in %d unreserved ports; harmless outside the host network namespace",
			sc.RangeLo, sc.RangeHi, npLo, npHi, overlap)
	default:
		fix := "keep net.ipv4.ip_local_port_range clear of the NodePort range and of the node's listeners (eaddr could not list the sockets to check a range against them)"
		if p != nil {
			fix = strings.Join(nodePortRangeFixes(p, npLo, npHi), "; ")
		}
		r.Add(SevWarning, "ip_local_port_range %d-%d overlaps the NodePort range %d-%d in %d unreserved ports; this is the host network namespace: the kernel can hand out NodePorts as source ports, and since Kubernetes 1.22 replies to them (kubelet health checks) can be captured by NodePort rules. Fix: %s",
			sc.RangeLo, sc.RangeHi, npLo, npHi, overlap, fix)
	}
}

// auditBudget: the busiest destinations against --warn/--crit, and the
// listeners inside the range.
func auditBudget(r *NetNSReport, p *portScene, o AuditOptions) {
	sort.Slice(r.Destinations, func(i, j int) bool {
		if r.Destinations[i].Ports != r.Destinations[j].Ports {
			return r.Destinations[i].Ports > r.Destinations[j].Ports
		}
		return r.Destinations[i].Remote < r.Destinations[j].Remote
	})
	if len(r.Destinations) > o.Top {
		r.Destinations = r.Destinations[:o.Top]
	}
	if len(r.Destinations) > 0 {
		d := r.Destinations[0]
		switch {
		case d.Exhausted:
			r.Add(SevCritical, "no port is left toward %s: %d ports (%d%%) are taken for it, and new connections to it fail with EADDRNOTAVAIL", d.Remote, d.Ports, d.Percent)
		case d.Percent >= o.Crit:
			r.Add(SevCritical, "%d ports (%d%%) are taken for connections toward %s: new connections to it fail with EADDRNOTAVAIL at 100%%", d.Ports, d.Percent, d.Remote)
		case d.Percent >= o.Warn:
			r.Add(SevWarning, "%d ports (%d%%) are taken for connections toward %s", d.Ports, d.Percent, d.Remote)
		}
	}
	if r.HeldForAll > 0 {
		r.Add(SevInfo, "%d ports of the range are held for every destination (sockets that bind() before connect(), bound-only sockets, listeners, their orphans): no connect() can have them", r.HeldForAll)
	}
	if r.Unsure > 0 {
		r.Add(SevInfo, "%d ports are held by sockets whose bind bucket could not be read (%s): counted as taken toward their own destination only", r.Unsure, r.Source)
	}
	if len(r.Listeners) > 0 {
		r.Add(SevInfo, "%d listening socket(s) inside the ephemeral range (%s): an outgoing connection can take the port while the listener restarts; %s",
			len(r.Listeners), strings.Join(r.Listeners, ", "), reserveListeners(p))
	}
}

func percent(n, of int) int {
	if of <= 0 {
		return 100
	}
	return n * 100 / of
}

// reserveListeners: reserve the ports of the listeners inside the range
// when that leaves ports, else move them.
func reserveListeners(p *portScene) string {
	var ports []int
	for _, s := range p.socks {
		if port := int(s.Local.Port()); s.State == netdiag.StateListen && p.inRange(port) && !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	set := portSettings{reserved: withPorts(p.sc.Reserved, ports), reserve: true}
	if left := set.ports(p.sc); left > 0 {
		return fmt.Sprintf("reserve them: net.ipv4.ip_local_reserved_ports=%s (the list replaces the current one, leaving %s of the range usable)", spansString(set.reserved), portCount(left))
	}
	return "move them out of the range: reserving them would leave no port"
}
