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
	"github.com/eaddr/eaddr/ports"
)

// CheckFlags are the flags of `eaddr check`.
type CheckFlags struct {
	Output        string
	NodePortRange string
	HostNetNS     uint64
	NetNS         []string
	Warn, Crit    int
	Top           int
	CRIEndpoint   string
	// SocketIterators: read sockets with the BPF socket iterators.
	SocketIterators bool

	netns []uint64 // --netns, parsed
	json  bool     // --output json
}

// SetFlags registers the flags on fs; checkHelp groups them.
func (f *CheckFlags) SetFlags(fs *pflag.FlagSet) {
	f.setCommonFlags(fs)
	fs.StringVarP(&f.Output, "output", "o", "text", "text (or table): a table for a person, within the terminal's width; json: one object, for a script (docs/check.md)")
	fs.IntVar(&f.Warn, "warn", pipeline.DefaultPortsWarn, "a warning, with the holders and the fix, when the ports toward one destination reach this percent of the usable range (as eaddr trace --warn and the shipped alerts)")
	fs.IntVar(&f.Crit, "crit", 90, "critical at this percent")
	fs.IntVar(&f.Top, "top", 3, "destinations to list per netns")
}

// setCommonFlags registers the flags check and top share, with the same
// meaning as in eaddr trace.
func (f *CheckFlags) setCommonFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.NetNS, "netns", nil, "only these network namespaces: inodes (stat -L -c %i /proc/PID/ns/net) or names in /run/netns, comma separated (default: every netns with a process in it or mounted, as ip netns add does)")
	fs.StringVar(&f.NodePortRange, "node-port-range", "30000-32767", "the cluster's Service NodePort range (kube-apiserver --service-node-port-range)")
	fs.Uint64Var(&f.HostNetNS, "host-netns", 0, "inode of the node's network namespace, where NodePorts live (default: that of pid 1, else of kthreadd, pid 2)")
	fs.BoolVar(&f.SocketIterators, "socket-iterators", true, "read sockets with BPF socket iterators, which show ports held for every destination (bind() before connect()); false: sock_diag only, and such ports count as unsure")
	fs.StringVar(&f.CRIEndpoint, "cri-endpoint", "", "container runtime socket that names the pod of each netns (default: the first of the containerd, k3s, CRI-O and cri-dockerd sockets); one given must be a unix socket")
}

// checkOutput accepts the forms check and top print: text, or table,
// which is the same (their text is a table), and json.
func (f *CheckFlags) checkOutput() error {
	format, err := output.ParseFormat(f.Output, output.Text, output.Table, output.JSON)
	if err != nil {
		return usageErrorf("--output: %v", err)
	}
	f.json = format == output.JSON
	return nil
}

// parseCommon checks the shared flags: --netns names netns that exist,
// --cri-endpoint is a socket.
func (f *CheckFlags) parseCommon() error {
	var err error
	if f.netns, err = parseNetNSFlag(f.NetNS); err != nil {
		return err
	}
	return checkCRIFlag(f.CRIEndpoint)
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

// checkHelp is eaddr check --help.
var checkHelp = helpDoc{
	usage: "eaddr check [flags]",
	about: `Audit this node's network namespaces before connections fail (needs root): for the host's and every
other netns (with a process in it, or mounted by ip netns add), the ephemeral port range, reserved
ports and ip_unprivileged_port_start; the host's range against the NodePort range; for the busiest
destinations, the ports a connect() toward each could not have now (the port model of eaddr's
diagnosis), against --warn and --crit, and under each warned one the processes that hold its ports
(pid, comm, pod) and the fix, as eaddr trace diagnoses a failure; listeners inside the range. A netns
that cannot be audited is UNKNOWN, with why: never OK. Columns and JSON fields: docs/check.md.`,
	examples: []example{
		{"audit the node, for a person", "sudo eaddr check"},
		{"one pod's netns, found by a process of it", "sudo eaddr check --netns $(stat -L -c %i /proc/PID/ns/net)"},
		{"from cron or a node-problem-detector plugin", "eaddr check -o json >/var/log/eaddr-check.json; echo $?"},
	},
	groups: []flagGroup{
		{"What to audit", []string{"netns", "warn", "crit", "top", "node-port-range", "host-netns"}},
		{"Output", []string{"output"}},
		{"Sources", []string{"cri-endpoint", "socket-iterators"}},
	},
	footer: `Exit status, from the worst status of all (ok < info < unknown < warning < critical):
  0  ok or info only: every network namespace was audited and is clean
  1  a warning or critical finding (also when others are unknown), or a failure
  2  bad usage
  3  unknown: a netns could not be audited and nothing worse was found, or check lacks the privilege
     to look (root, or CAP_SYS_ADMIN and CAP_SYS_PTRACE; without them it says so and audits nothing)`,
}

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.Usage = func() { writeHelp(stdout, fs, checkHelp, helpWidth(stdout)) }
	var f CheckFlags
	f.SetFlags(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if err := f.checkOutput(); err != nil {
		return err
	}
	if err := f.parseCommon(); err != nil {
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
	o := diagnose.AuditOptions{HostNetNS: f.HostNetNS, NodePortLo: npLo, NodePortHi: npHi, Warn: f.Warn, Crit: f.Crit, Top: f.Top, Findings: true}
	rep, err := auditNode(&f, o, log)
	if err != nil {
		return err
	}
	rep.NodePortRange = fmt.Sprintf("%d-%d", npLo, npHi)
	if f.json {
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

// auditNode audits the netns f selects (every netns with a process in it
// or mounted, the host's first), with their pods' names, and the holders
// and fix of each destination at --warn or above.
func auditNode(f *CheckFlags, o diagnose.AuditOptions, log *slog.Logger) (checkReport, error) {
	var rep checkReport
	a := openNodeAudit(f, o, f.Top, log)
	defer a.close()
	reps, err := a.audit()
	if err != nil {
		return rep, err
	}
	for _, r := range reps {
		if r.Worst > rep.Worst {
			rep.Worst = r.Worst
		}
		rep.NetNS = append(rep.NetNS, r)
	}
	return rep, nil
}

// nodeAudit is what auditing the node's netns needs open: the pod names
// (CRI), the BPF socket iterators for a netns read on its own, and the
// port sampler (ports: one node walk a sample, the same as eaddr trace's
// and top's). check audits once; top each interval.
type nodeAudit struct {
	f    *CheckFlags
	cri  *kube.Resolver
	iter interface{ Close() error }
	s    *ports.Sampler
}

// openNodeAudit opens the resolver of pod names and, with
// f.SocketIterators, the BPF readers when they load (else it says why and
// sock_diag alone is read); the first culprits destinations of each netns
// at o.Warn or above get their holders and fix.
func openNodeAudit(f *CheckFlags, o diagnose.AuditOptions, culprits int, log *slog.Logger) *nodeAudit {
	_, pods := pod.PodCgroups()
	a := &nodeAudit{f: f, cri: kube.NewResolver(f.CRIEndpoint, pods, log)}
	if f.SocketIterators {
		if it := pipeline.OpenSockIter(log); it != nil {
			a.iter, o.Iter = it, it
		}
	}
	a.s = ports.New(ports.Config{Audit: o, Mounts: true, Only: f.netns, Comm: true, Culprits: culprits, NoWalk: !f.SocketIterators, Log: log,
		PodOf: func(inode uint64) *checkPod {
			if p, ok := a.cri.PodByNetNS(inode); ok {
				return &checkPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID}
			}
			return nil
		}})
	return a
}

// audit samples the netns f selects, the host's first, and names the pods
// of their warned destinations' holders.
func (a *nodeAudit) audit() ([]netnsReport, error) {
	smp, err := a.s.Sample()
	if err != nil {
		return nil, err
	}
	if smp.Cut > 0 {
		slog.Warn("the node walk could not read part of the TCP hash tables (chains changing under it): counts may be low", "cut", smp.Cut)
	}
	out := smp.NetNS
	for i := range out {
		a.nameHolders(&out[i])
	}
	host := a.f.HostNetNS
	sort.SliceStable(out, func(i, j int) bool { return out[i].Inode == host && out[j].Inode != host })
	return out, nil
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
	a.s.Close()
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
