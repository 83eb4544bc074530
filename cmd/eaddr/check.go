package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pipeline"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/pod/kube"
)

// CheckFlags are the flags of `eaddr check`.
type CheckFlags struct {
	Output        string
	NodePortRange string
	HostNetNS     uint64
	NetNS         []uint
	Warn, Crit    int
	Top           int
	CRIEndpoint   string
	// SocketIterators: read sockets with the BPF socket iterators.
	SocketIterators bool
}

// SetFlags registers the flags on fs.
func (f *CheckFlags) SetFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "table", "table for a person, json for a script")
	fs.StringVar(&f.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint64Var(&f.HostNetNS, "host-netns", 0, "inode of the node's network namespace, where NodePorts live (default: that of pid 1, else of kthreadd, pid 2, a kernel thread always in it)")
	fs.UintSliceVar(&f.NetNS, "netns", nil, "check only these netns inodes (default: every netns found through /proc or mounted, as ip netns add does)")
	fs.IntVar(&f.Warn, "warn", 70, "warn when the ports toward one destination reach this percent of the usable range")
	fs.IntVar(&f.Crit, "crit", 90, "critical at this percent")
	fs.IntVar(&f.Top, "top", 3, "destinations to list per netns")
	fs.BoolVar(&f.SocketIterators, "socket-iterators", true, "read each netns's sockets with BPF socket iterators, which show ports held for every destination (bind() before connect()); false: sock_diag only, and such ports are counted as unsure")
	fs.StringVar(&f.CRIEndpoint, "cri-endpoint", "", "container runtime socket, to name the pod of each netns (default: the usual containerd, k3s, CRI-O and cri-dockerd sockets)")
}

// The audit is diagnose's (it shares the port budget with the diagnosis of a
// failure); output writes its report.
type (
	severity    = diagnose.Severity
	netnsReport = diagnose.NetNSReport
	checkPod    = diagnose.CheckPod
	checkReport = diagnose.CheckReport
)

const (
	sevInfo     = diagnose.SevInfo
	sevUnknown  = diagnose.SevUnknown
	sevWarning  = diagnose.SevWarning
	sevCritical = diagnose.SevCritical
)

// checkUsage is check's --help; %s is the flags.
const checkUsage = `Usage: eaddr check [flags]

Audit this node's network namespaces before connections fail (needs root): for the host
netns and every other netns found through /proc, the ephemeral port range, reserved ports,
ip_unprivileged_port_start and the parity advice of ip-sysctl.txt; overlap of the host's
range with the NodePort range; for the busiest destinations, the ports a connect() toward
each could not have now, against --warn/--crit (the port model of eaddr's diagnosis: ports
held toward it, ports held for every destination by bound sockets and listeners, TIME_WAIT
that cannot be reused); listening sockets inside the ephemeral range. Under a destination
at --warn or above: the processes that hold its ports (pid, comm, pod) and the fix, as
eaddr trace diagnoses a failure toward it. The table's columns and the JSON's fields are in
docs/check.md; the table fits the terminal (120 columns when stdout is no terminal).

A network namespace with no process in it but a mount (ip netns add: /run/netns/NAME) is
audited through the mount. One that cannot be audited (no live process left in it to enter
and no mount of it, its sysctls unreadable, its sockets not listed) is UNKNOWN, with why:
never OK. The worst
status of all, ok < info < unknown < warning < critical, sets the exit status:

  0  ok or info only: every network namespace was audited and is clean
  1  a warning or critical finding (also when others are unknown), or a failure
  2  bad usage
  3  unknown: a network namespace could not be audited and nothing worse was found,
     nothing could be audited at all, or check is not privileged enough to look (it
     needs root, or CAP_SYS_ADMIN to enter each network namespace and CAP_SYS_PTRACE
     to see which namespaces other processes are in; without them it says so in one
     line and audits nothing)

For cron, a node-problem-detector custom plugin (3 reads as unknown), or a person.

Flags:
%s`

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(stderr, checkUsage, fs.FlagUsages())
	}
	var f CheckFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if f.Output != "table" && f.Output != "json" {
		return usageErrorf("--output must be table or json, not %q", f.Output)
	}
	if err := checkCRIFlag(f.CRIEndpoint); err != nil {
		return err
	}
	if err := checkPrivilege(); err != nil {
		return err
	}
	npLo, npHi, err := parsePortRange(f.NodePortRange)
	if err != nil {
		return usageErrorf("--node-port-range: %v", err)
	}
	if f.Warn <= 0 || f.Crit <= 0 || f.Warn > f.Crit || f.Crit > 100 {
		return usageErrorf("--warn %d and --crit %d must satisfy 0 < warn <= crit <= 100", f.Warn, f.Crit)
	}
	if f.HostNetNS == 0 {
		if f.HostNetNS, err = netdiag.HostInode(); err != nil {
			return fmt.Errorf("finding the host network namespace: %w", err)
		}
	}
	netdiag.SetLogger(log) // says once if sock_diag cannot dump sockets and /proc/net is read instead
	found, err := listNetNS()
	if err != nil {
		return err
	}
	o := diagnose.AuditOptions{HostNetNS: f.HostNetNS, NodePortLo: npLo, NodePortHi: npHi, Warn: f.Warn, Crit: f.Crit, Top: f.Top}
	rep := auditNode(&f, o, found, log)
	rep.NodePortRange = fmt.Sprintf("%d-%d", npLo, npHi)
	if f.Output == "json" {
		if _, err := stdout.Write(append(output.AppendCheckReport(nil, &rep), '\n')); err != nil {
			return err
		}
	} else if err := output.WriteCheckTable(stdout, &rep, termWidth(stdout)); err != nil {
		return err
	}
	return checkStatus(&rep)
}

// termWidth is the columns of the terminal w is, else output.DefaultWidth
// (a pipe, a file, cron's mail): what check's and top's tables keep to.
func termWidth(w io.Writer) int {
	if t := stdoutTerminal(w); t != nil && t.Width() > 0 {
		return t.Width()
	}
	return output.DefaultWidth
}

// nodeNetNS are the netns on the node: by a live process in each
// (diagnose.NetNSMembers) and by their mounts (ip netns add: a netns with
// no process in it is audited through its mount).
type nodeNetNS struct {
	pids   map[uint64]int
	mounts map[uint64]string
}

func listNetNS() (nodeNetNS, error) {
	pids, err := diagnose.NetNSMembers()
	if err != nil {
		return nodeNetNS{}, err
	}
	mounts, err := netdiag.NetNSMounts()
	if err != nil {
		return nodeNetNS{}, fmt.Errorf("listing the mounted network namespaces: %w", err)
	}
	return nodeNetNS{pids, mounts}, nil
}

// auditNode audits the netns f selects, with their pods' names and the
// socket iterators when they load, and the holders and fix of each
// destination at --warn or above.
func auditNode(f *CheckFlags, o diagnose.AuditOptions, found nodeNetNS, log *slog.Logger) checkReport {
	var rep checkReport
	a := openNodeAudit(f, o, f.Top, log)
	defer a.close()
	for _, r := range a.audit(found) {
		if r.Worst > rep.Worst {
			rep.Worst = r.Worst
		}
		rep.NetNS = append(rep.NetNS, r)
	}
	return rep
}

// nodeAudit is what auditing the node's netns needs open: the pod names
// (CRI), the BPF socket iterators and the diagnoser of the culprits. check
// audits once; top each interval.
type nodeAudit struct {
	f        *CheckFlags
	o        diagnose.AuditOptions
	cri      *kube.Resolver
	iter     interface{ Close() error }
	d        *diagnose.Diagnoser
	culprits int // the destinations of a netns whose holders and fix are looked for, at o.Warn or above
}

// openNodeAudit opens the resolver of pod names and, with
// f.SocketIterators, the socket iterators when they load (else it says why
// and sock_diag alone is read); the first culprits destinations of each
// netns at o.Warn or above get their holders and fix.
func openNodeAudit(f *CheckFlags, o diagnose.AuditOptions, culprits int, log *slog.Logger) *nodeAudit {
	_, pods := pod.PodCgroups()
	a := &nodeAudit{f: f, o: o, cri: kube.NewResolver(f.CRIEndpoint, pods, log), culprits: culprits}
	if f.SocketIterators {
		if it := pipeline.OpenSockIter(log); it != nil {
			a.iter, a.o.Iter = it, it
		}
	}
	a.d = diagnose.AuditDiagnoser(a.o)
	return a
}

// audit audits the netns f selects among those found, the host's first,
// each with its pod's name when the runtime knows it, its mount, and the
// holders (with their pods) and fix of its warned destinations.
func (a *nodeAudit) audit(found nodeNetNS) []netnsReport {
	var out []netnsReport
	for _, inode := range checkedNetNS(*a.f, found) {
		r := diagnose.AuditNetNS(inode, found.pids[inode], a.o)
		r.Mount = found.mounts[inode]
		if p, ok := a.cri.PodByNetNS(inode); ok && !r.Host {
			r.Pod = &checkPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
		}
		if r.Error == "" {
			a.d.Culprits(&r, a.o.Warn, a.culprits)
			a.nameHolders(&r)
		}
		out = append(out, r)
	}
	return out
}

// nameHolders names the pod of each holder whose cgroup gives its UID,
// when the runtime's list has it (it was just listed for the netns's pod);
// else the UID alone is shown.
func (a *nodeAudit) nameHolders(r *netnsReport) {
	for i := range r.Destinations {
		hs := r.Destinations[i].Holders
		for j := range hs {
			if hs[j].PodUID == "" {
				continue
			}
			if p, st, _ := a.cri.Names(kube.Key("", hs[j].PodUID)); st == kube.Found && p.Name != "" {
				hs[j].Pod = &checkPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
			}
		}
	}
}

func (a *nodeAudit) close() {
	if a.iter != nil {
		a.iter.Close()
	}
	a.cri.Close()
}

// unknownError makes check exit 3 after saying why on stderr: what it
// could not audit, when nothing worse was found.
type unknownError struct{ s string }

func (e unknownError) Error() string { return e.s }

// checkStatus is check's exit for the report (see its usage): nil for
// clean, quietError for a finding, unknownError when the worst is unknown.
func checkStatus(rep *checkReport) error {
	unknown := 0
	for _, r := range rep.NetNS {
		if r.Worst == sevUnknown {
			unknown++
		}
	}
	switch {
	case rep.Worst >= sevWarning:
		return quietError{"check found problems"}
	case len(rep.NetNS) == 0:
		return unknownError{"no network namespace to audit: nothing was audited (exit 3)"}
	case unknown == len(rep.NetNS):
		return unknownError{fmt.Sprintf("none of the %d network namespaces could be audited (exit 3): see each one's error", unknown)}
	case rep.Worst == sevUnknown:
		return unknownError{fmt.Sprintf("%d of %d network namespaces could not be audited (exit 3): see each one's error; the others are clean", unknown, len(rep.NetNS))}
	}
	return nil
}

// checkNeeds are the capabilities check cannot do without: CAP_SYS_ADMIN to
// setns() into a netns, CAP_SYS_PTRACE to read /proc/PID/ns/net of processes
// that are not ours (without it, only eaddr's own netns shows, and a partial
// audit would look clean).
var checkNeeds = []struct {
	capability int
	name       string
}{{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}, {unix.CAP_SYS_PTRACE, "CAP_SYS_PTRACE"}}

// checkPrivilege returns a privilegeError naming what is missing.
func checkPrivilege() error { return needPrivilege("check") }

// needPrivilege is checkPrivilege for command cmd (check, top).
func needPrivilege(cmd string) error {
	var missing []string
	for _, c := range checkNeeds {
		if !hasCapability(c.capability) {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return privilegeError{fmt.Errorf("%s needs root, or CAP_SYS_ADMIN and CAP_SYS_PTRACE, to see every network namespace; missing %s: nothing was audited (exit 3)", cmd, strings.Join(missing, " and "))}
}

// checkedNetNS are the netns to audit (--netns, else all found), the
// host's first.
func checkedNetNS(f CheckFlags, found nodeNetNS) []uint64 {
	var inodes []uint64
	for _, n := range f.NetNS {
		inodes = append(inodes, uint64(n))
	}
	if len(inodes) == 0 {
		for inode := range found.pids {
			inodes = append(inodes, inode)
		}
		for inode := range found.mounts {
			if _, ok := found.pids[inode]; !ok {
				inodes = append(inodes, inode)
			}
		}
	}
	sort.Slice(inodes, func(i, j int) bool {
		if (inodes[i] == f.HostNetNS) != (inodes[j] == f.HostNetNS) {
			return inodes[i] == f.HostNetNS
		}
		return inodes[i] < inodes[j]
	})
	return inodes
}
