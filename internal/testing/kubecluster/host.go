package kubecluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/internal/testing/critest"
	"golang.org/x/sys/unix"
)

// sysctls are the settings a node's components (or the CNI bridge plugin)
// may change. Each is recorded before start and written back by Teardown when
// it differs. The kubelet sets the first six (protectKernelDefaults: false);
// the bridge plugin (isGateway) sets ip_forward; kube-proxy sets route_localnet
// (off here: localhostNodePorts false) and the conntrack ones (off here: its
// conntrack settings are 0), listed all the same so that a change in a later
// version is undone too.
var sysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv4/conf/all/forwarding", "net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait", "net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/netfilter/nf_conntrack_udp_timeout", "net/netfilter/nf_conntrack_udp_timeout_stream",
}

// readSysctls returns the current values of sysctls (those that exist).
func readSysctls() map[string]string {
	out := map[string]string{}
	for _, name := range sysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", name)); err == nil {
			out[name] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// restoreSysctls writes back every recorded value that changed. ip_forward
// first: writing it resets every interface's forwarding.
func restoreSysctls(saved map[string]string) error {
	var problems []error
	names := make([]string, 0, len(saved))
	for n := range saved {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if a == "net/ipv4/ip_forward" {
			return -1
		}
		if b == "net/ipv4/ip_forward" {
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		path := filepath.Join("/proc/sys", name)
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) == saved[name] {
			continue
		}
		if err := os.WriteFile(path, []byte(saved[name]), 0o644); err != nil {
			problems = append(problems, fmt.Errorf("restoring %s to %s: %w", name, saved[name], err))
		}
	}
	return errors.Join(problems...)
}

// iptablesTools are the save commands of both backends and families; each
// must be run only if installed.
var iptablesTools = []string{"iptables-nft", "ip6tables-nft", "iptables-legacy", "ip6tables-legacy"}

// kubeChains returns, per tool, the KUBE-* chains present in its rules.
func kubeChains() map[string][]string {
	out := map[string][]string{}
	for _, tool := range iptablesTools {
		dump, err := iptablesSave(tool)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(dump, "\n") {
			if strings.HasPrefix(line, ":KUBE-") {
				out[tool] = append(out[tool], strings.Fields(line[1:])[0])
			}
		}
	}
	return out
}

// iptablesSave dumps the rules of tool. A legacy tool is not run when its
// kernel tables are not loaded: it would load them.
func iptablesSave(tool string) (string, error) {
	legacy := map[string]string{"iptables-legacy": "/proc/net/ip_tables_names", "ip6tables-legacy": "/proc/net/ip6_tables_names"}
	if f, ok := legacy[tool]; ok {
		if _, err := os.Stat(f); err != nil {
			return "", err
		}
	}
	path, err := exec.LookPath(tool + "-save")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(path).Output()
	return string(out), err
}

// removeKubeChains deletes every rule that jumps to a KUBE-* chain or lives
// in one, and the chains, in both backends and families: kube-proxy's and
// the kubelet's (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY), which kube-proxy
// --cleanup leaves. Each table is rewritten from its own dump with those lines
// left out (iptables-restore -T TABLE), so other rules are kept.
func removeKubeChains() error {
	var problems []error
	for tool := range kubeChains() {
		dump, err := iptablesSave(tool)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for table, body := range tablesWithKube(dump) {
			cmd := exec.Command(tool+"-restore", "-T", table)
			cmd.Stdin = strings.NewReader(body)
			if out, err := cmd.CombinedOutput(); err != nil {
				problems = append(problems, fmt.Errorf("%s-restore -T %s: %v: %s", tool, table, err, out))
			}
		}
	}
	if left := kubeChains(); len(left) > 0 {
		problems = append(problems, fmt.Errorf("KUBE-* chains left: %v", left))
	}
	return errors.Join(problems...)
}

// tablesWithKube splits an iptables-save dump into tables and returns those
// that mention KUBE-, each without the lines that do.
func tablesWithKube(dump string) map[string]string {
	out := map[string]string{}
	var table string
	var b strings.Builder
	kube := false
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, kube = line[1:], false
			b.Reset()
			b.WriteString(line + "\n")
		case line == "COMMIT":
			b.WriteString("COMMIT\n")
			if kube {
				out[table] = b.String()
			}
		case strings.Contains(line, "KUBE-"):
			kube = true
		case table != "" && line != "" && !strings.HasPrefix(line, "#"):
			b.WriteString(line + "\n")
		}
	}
	return out
}

// runIP runs ip(8) (iproute2) with args.
func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// deleteLink deletes a network interface if it exists.
func deleteLink(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return runIP("link", "del", name)
}

// mountsBelow returns the mount points at or below dir and the given files,
// most recent first.
func mountsBelow(dir string, files []string) []string {
	mounts, err := mountinfo.Self()
	if err != nil {
		return nil
	}
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i].MountPoint
		if m == dir || strings.HasPrefix(m, dir+"/") || slices.Contains(files, m) {
			out = append(out, m)
		}
	}
	return out
}

// unmountBelow lazily unmounts everything at or below dir.
func unmountBelow(dir string) error {
	for range 20 {
		m := mountsBelow(dir, nil)
		if len(m) == 0 {
			return nil
		}
		for _, p := range m {
			unix.Unmount(p, unix.MNT_DETACH)
		}
	}
	if left := mountsBelow(dir, nil); len(left) > 0 {
		return fmt.Errorf("still mounted: %v", left)
	}
	return nil
}

// cgroupPIDs returns the processes in the cgroup root, in any hierarchy.
func cgroupPIDs(root string) []int { return critest.CgroupPIDs(critest.CgroupTree(root)) }

// removeCgroups removes the cgroup root's trees, deepest first, retrying
// while just-killed tasks leave.
func removeCgroups(root string) error { return critest.RemoveCgroupDirs(critest.CgroupTree(root)) }

// makeCgroupRoot makes the kubelet's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist). A new cpuset cgroup has no
// CPUs and no memory nodes: the root's are copied into it (v1; a v2 root
// has no such files).
func makeCgroupRoot(root string) error {
	for _, mnt := range critest.CgroupMounts() {
		dir := filepath.Join(mnt, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(mnt, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// nftTables lists the nftables tables ("ip filter", "ip6 nat", ...), nil
// when nft is not installed.
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(line, "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables
}

// removeEmptyXtables deletes the iptables-nft tables (ip/ip6 filter, nat,
// mangle, raw) that were not there before (iptables-nft makes a table the
// first time a chain is added to it: the kubelet's KUBE-* chains) and that
// have no rule now.
func removeEmptyXtables(before []string) error {
	var problems []error
	for _, t := range nftTables() {
		family, name, _ := strings.Cut(t, " ")
		tool := map[string]string{"ip": "iptables-nft-save", "ip6": "ip6tables-nft-save"}[family]
		if tool == "" || slices.Contains(before, t) || !slices.Contains([]string{"filter", "nat", "mangle", "raw"}, name) {
			continue
		}
		out, err := exec.Command(tool, "-t", name).Output()
		if err != nil || strings.Contains(string(out), "\n-A ") {
			continue // someone else's rules: keep it
		}
		if out, err := exec.Command("nft", "delete", "table", family, name).CombinedOutput(); err != nil {
			problems = append(problems, fmt.Errorf("nft delete table %s: %v: %s", t, err, out))
		}
	}
	return errors.Join(problems...)
}
