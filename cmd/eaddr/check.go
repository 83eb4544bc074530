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
	fs.UintSliceVar(&f.NetNS, "netns", nil, "check only these netns inodes (default: every netns found through /proc)")
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
that cannot be reused); listening sockets inside the ephemeral range.

A network namespace that cannot be audited (no live process left in it to enter, its
sysctls unreadable, its sockets not listed) is UNKNOWN, with why: never OK. The worst
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
	members, err := diagnose.NetNSMembers()
	if err != nil {
		return err
	}
	o := diagnose.AuditOptions{HostNetNS: f.HostNetNS, NodePortLo: npLo, NodePortHi: npHi, Warn: f.Warn, Crit: f.Crit, Top: f.Top}
	rep := auditNode(&f, o, members, log)
	rep.NodePortRange = fmt.Sprintf("%d-%d", npLo, npHi)
	if f.Output == "json" {
		if _, err := stdout.Write(append(output.AppendCheckReport(nil, &rep), '\n')); err != nil {
			return err
		}
	} else {
		output.WriteCheckTable(stdout, &rep)
	}
	return checkStatus(&rep)
}

// auditNode audits the netns f selects, with their pods' names and the
// socket iterators when they load.
func auditNode(f *CheckFlags, o diagnose.AuditOptions, members map[uint64]int, log *slog.Logger) checkReport {
	var rep checkReport
	a := openNodeAudit(f, o, log)
	defer a.close()
	for _, r := range a.audit(members) {
		if r.Worst > rep.Worst {
			rep.Worst = r.Worst
		}
		rep.NetNS = append(rep.NetNS, r)
	}
	return rep
}

// nodeAudit is what auditing the node's netns needs open: the pod names
// (CRI) and the BPF socket iterators. check audits once; top each interval.
type nodeAudit struct {
	f    *CheckFlags
	o    diagnose.AuditOptions
	cri  *kube.Resolver
	iter interface{ Close() error }
}

// openNodeAudit opens the resolver of pod names and, with
// f.SocketIterators, the socket iterators when they load (else it says why
// and sock_diag alone is read).
func openNodeAudit(f *CheckFlags, o diagnose.AuditOptions, log *slog.Logger) *nodeAudit {
	_, pods := pod.PodCgroups()
	a := &nodeAudit{f: f, o: o, cri: kube.NewResolver(f.CRIEndpoint, pods, log)}
	if f.SocketIterators {
		if it := pipeline.OpenSockIter(log); it != nil {
			a.iter, a.o.Iter = it, it
		}
	}
	return a
}

// audit audits the netns f selects among members, the host's first, each
// with its pod's name when the runtime knows it.
func (a *nodeAudit) audit(members map[uint64]int) []netnsReport {
	var out []netnsReport
	for _, inode := range checkedNetNS(*a.f, members) {
		r := diagnose.AuditNetNS(inode, members[inode], a.o)
		if p, ok := a.cri.PodByNetNS(inode); ok && !r.Host {
			r.Pod = &checkPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
		}
		out = append(out, r)
	}
	return out
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

// checkedNetNS are the netns to audit (--netns, else all), the host's first.
func checkedNetNS(f CheckFlags, members map[uint64]int) []uint64 {
	var inodes []uint64
	for _, n := range f.NetNS {
		inodes = append(inodes, uint64(n))
	}
	if len(inodes) == 0 {
		for inode := range members {
			inodes = append(inodes, inode)
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
