package diagnose

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
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
	// DestinationsCut: sockets not counted toward their destination, the
	// netns having more destinations than are counted apart
	// (AuditOptions.MaxDests): the busiest list may miss one.
	DestinationsCut int       `json:"destinations_cut,omitempty"`
	Findings        []Finding `json:"findings,omitempty"`
	Worst           Severity  `json:"worst"`
	Error           string    `json:"error,omitempty"`
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
	// Findings: check's findings (the range, the NodePort overlap with the
	// host's fixes, the budget against Warn and Crit, the listeners); top
	// and the trace's sampler use the counts only.
	Findings bool
	// MaxDests bounds the destinations of a netns counted apart
	// (portmodel.Tally; 0: portmodel.DefaultMaxDests).
	MaxDests int
	// Open enters the netns (nil: netdiag.OpenNetns); tests make it fail
	// as when the last process in the netns exits before it is entered.
	Open func(inode uint64, pid int) (*netdiag.Netns, error)
}

// AuditNetNS reads one netns through pid (or another process in it) and
// reports its port range, budget and findings: its sockets counted into a
// Tally as they are read (EachPortSocket), none kept. The port sampler
// reads every netns at once with the node walk and audits each with
// AuditTally; this is its way for a netns the walk cannot read.
func AuditNetNS(inode uint64, pid int, o AuditOptions) NetNSReport {
	r := NetNSReport{Inode: inode, PID: pid, Host: inode == o.HostNetNS}
	ns, err := o.open(inode, pid)
	if err != nil {
		r.Error = err.Error()
		r.Add(SevUnknown, "not audited: cannot enter the network namespace: %v", err)
		return r
	}
	defer ns.Close()
	r.PID = ns.PID()
	r.Comm = ProcComm(r.PID)
	sys, ps, err := ns.PortSettings()
	if err == nil {
		sys.NowSec, sys.NowMS, err = portmodel.KernelClock()
	}
	if err != nil {
		r.Error = err.Error()
		r.Add(SevUnknown, "not audited: cannot read the port sysctls: %v", err)
		return r
	}
	t := portmodel.NewTally(sys, o.MaxDests)
	src, err := ns.EachPortSocket(o.Iter, false, t.Add)
	if err != nil {
		auditRange(&r, &ps, nil, o)
		r.Error = err.Error()
		r.Add(SevUnknown, "ports in use not known: cannot list the sockets: %v", err)
		return r
	}
	AuditTally(&r, t, &ps, string(src), o)
	return r
}

// open enters a netns with o.Open, else netdiag.OpenNetns.
func (o AuditOptions) open(inode uint64, pid int) (*netdiag.Netns, error) {
	if o.Open != nil {
		return o.Open(inode, pid)
	}
	return netdiag.OpenNetns(inode, pid)
}

// ProcComm is the name of process pid (/proc/PID/comm), "" when it cannot
// be read.
func ProcComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// AuditTally fills r, the report of a netns with its Inode, PID, Host and
// Comm set, from the tally of its sockets (read from source) and its port
// sysctls ps: its budget, its busiest destinations by the port model, and
// with o.Findings check's findings.
func AuditTally(r *NetNSReport, t *portmodel.Tally, ps *netdiag.PortSysctls, source string, o AuditOptions) {
	auditRange(r, ps, func() []string { return hostNodePortFixes(r, o) }, o)
	if r.Host && o.Findings {
		auditHostMasquerade(r, o) // auditmasq.go
	}
	tallyPorts(r, t, source, o)
	if !o.Findings {
		return
	}
	var ports []int
	ls, _ := t.Listeners()
	for _, l := range ls {
		if p := int(l.Port()); !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	auditBudget(r, o, t.Sysctls(), ports)
}

// hostNodePortFixes are the fixes for a host range that overlaps the
// NodePort range, checked against the host's sockets (a snapshot of the
// host's netns); nil when they cannot be read.
func hostNodePortFixes(r *NetNSReport, o AuditOptions) []string {
	ns, err := netdiag.OpenNetns(r.Inode, r.PID)
	if err != nil {
		return nil
	}
	defer ns.Close()
	p, err := readPorts(ns, o.Iter, false, focus{}) // the ports it serves on
	if err != nil {
		return nil
	}
	return nodePortRangeFixes(p, o.NodePortLo, o.NodePortHi)
}

// auditRange: the range's shape, and with o.Findings its findings: parity,
// privileged ports, and its overlap with the NodePort range, with the
// host's fixes (hostFixes: checked against its sockets; nil or none when
// they could not be listed).
func auditRange(r *NetNSReport, sc *netdiag.PortSysctls, hostFixes func() []string, o AuditOptions) {
	r.PortRange = fmt.Sprintf("%d-%d", sc.RangeLo, sc.RangeHi)
	r.Reserved = netdiag.FormatSpans(sc.Reserved)
	r.UnprivilegedPort = sc.UnprivilegedStart
	r.Usable = sc.Usable()
	if !o.Findings {
		return
	}
	if sc.RangeLo%2 == sc.RangeHi%2 {
		r.Add(SevInfo, "ip_local_port_range %d %d: ip-sysctl.txt advises numbers of different parity (one even, one odd), as in the default 32768 60999", sc.RangeLo, sc.RangeHi)
	}
	if sc.RangeLo < sc.UnprivilegedStart {
		r.Add(SevInfo, "the range starts at %d, below ip_unprivileged_port_start %d: outgoing connections can take privileged ports that a service expects to bind", sc.RangeLo, sc.UnprivilegedStart)
	}
	// NodePorts live in the host's netns: there, a source port taken from
	// the NodePort range breaks replies to that connection. Elsewhere it
	// is harmless, and no fix is offered for it.
	npLo, npHi := o.NodePortLo, o.NodePortHi
	overlap := NodePortOverlap(sc, npLo, npHi)
	switch {
	case overlap == 0:
	case !r.Host:
		r.Add(SevInfo, "ip_local_port_range %d-%d overlaps the NodePort range %d-%d in %d unreserved ports; harmless outside the host network namespace",
			sc.RangeLo, sc.RangeHi, npLo, npHi, overlap)
	default:
		fix := "keep net.ipv4.ip_local_port_range clear of the NodePort range and of the node's listeners (eaddr could not list the sockets to check a range against them)"
		if fixes := callOrNil(hostFixes); len(fixes) > 0 {
			fix = strings.Join(fixes, "; ")
		}
		r.Add(SevWarning, "ip_local_port_range %d-%d overlaps the NodePort range %d-%d in %d unreserved ports; this is the host network namespace: the kernel can hand out NodePorts as source ports, and since Kubernetes 1.22 replies to them (kubelet health checks) can be captured by NodePort rules. Fix: %s",
			sc.RangeLo, sc.RangeHi, npLo, npHi, overlap, fix)
	}
}

func callOrNil(f func() []string) []string {
	if f == nil {
		return nil
	}
	return f()
}

// auditBudget: the busiest destination against --warn/--crit, the ports
// held for all or not judged, and the listeners inside the range (their
// ports: listenerPorts) with the reserve that keeps them clear.
func auditBudget(r *NetNSReport, o AuditOptions, sc portmodel.Sysctls, listenerPorts []int) {
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
	if r.DestinationsCut > 0 {
		r.Add(SevInfo, "%d sockets toward more than %d destinations were not counted per destination: the busiest destinations listed may miss one", r.DestinationsCut, o.maxDests())
	}
	if len(r.Listeners) > 0 {
		r.Add(SevInfo, "%d listening socket(s) inside the ephemeral range (%s): an outgoing connection can take the port while the listener restarts; %s",
			len(r.Listeners), strings.Join(r.Listeners, ", "), reserveListeners(sc, listenerPorts))
	}
}

func (o AuditOptions) maxDests() int {
	if o.MaxDests <= 0 {
		return portmodel.DefaultMaxDests
	}
	return o.MaxDests
}

func percent(n, of int) int {
	if of <= 0 {
		return 100
	}
	return n * 100 / of
}

// reserveListeners: reserve the ports of the listeners inside the range
// (ports, sorted) when that leaves ports, else move them.
func reserveListeners(sc portmodel.Sysctls, ports []int) string {
	set := portSettings{reserved: withPorts(sc.Reserved, ports), reserve: true}
	if left := set.ports(sc); left > 0 {
		return fmt.Sprintf("reserve them: net.ipv4.ip_local_reserved_ports=%s (the list replaces the current one, leaving %s of the range usable)", spansString(set.reserved), portCount(left))
	}
	return "move them out of the range: reserving them would leave no port"
}
