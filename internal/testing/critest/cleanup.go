package critest

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/child"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cniNetworkName is "name" in the CNI conflist; libcni caches results as
// /var/lib/cni/results/<name>-<sandbox ID>-<ifname>.
const cniNetworkName = "eaddr-critest"

// shimSocketDir is where containerd 1.6 puts the shims' sockets, whatever
// its state dir: /run/containerd/s/<sha256(address/namespace/id)>.
const shimSocketDir = "/run/containerd/s"

// cniCacheDir is libcni's cache directory (not configurable in containerd
// 1.6); results/ holds one file per network attachment until CNI DEL.
const cniCacheDir = "/var/lib/cni"

// cleanup undoes everything Start, RunPod and StartContainer did. Each step
// runs even if an earlier one failed; what could not be undone is reported
// with t.Errorf.
func (r *Runtime) cleanup(t testing.TB) {
	begin := time.Now()
	if t.Failed() {
		r.dumpLogs(t)
	}
	var problems []error
	add := func(err error) {
		if err != nil {
			problems = append(problems, err)
		}
	}

	if r.alive() && r.RuntimeService != nil {
		add(r.removePods())
	}
	if r.conn != nil {
		r.conn.Close()
	}
	add(r.stopContainerd())
	add(child.Sweep(r.leftoverPIDs, sweepTimeout))
	add(r.unmountAll())
	add(r.removeNetNSFiles())
	r.removeShimSockets()
	r.removeHostDirs()
	add(deleteLink(r.Bridge))
	add(r.removeCgroups())
	if remaining := r.mountsBelow(); len(remaining) > 0 {
		// Never RemoveAll through a mount point.
		add(fmt.Errorf("not removing %s: still mounted: %v", r.Dir, remaining))
	} else if err := os.RemoveAll(r.Dir); err != nil {
		add(err)
	}
	if err := errs(problems); err != nil {
		t.Errorf("critest: cleanup of %s: %v", r.Dir, err)
	}
	t.Logf("critest: cleaned up %s in %v", r.Dir, time.Since(begin).Round(time.Millisecond))
}

// dumpLogs prints the tails of containerd's log and of the container logs.
func (r *Runtime) dumpLogs(t testing.TB) {
	t.Logf("critest: tail of %s:\n%s", r.LogPath, tail(r.LogPath, 80))
	r.mu.Lock()
	pods := slices.Clone(r.pods)
	r.mu.Unlock()
	for _, p := range pods {
		filepath.WalkDir(p.logDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				t.Logf("critest: tail of %s:\n%s", path, tail(path, 20))
			}
			return nil
		})
	}
}

// removePods stops and removes every container and sandbox through CRI.
func (r *Runtime) removePods() error {
	c, cancel := ctxTimeout(2 * callTimeout)
	defer cancel()
	var problems []error
	cl, err := r.RuntimeService.ListContainers(c, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	for _, ctr := range cl.Containers {
		if _, err := r.RuntimeService.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: ctr.Id, Timeout: 0}); err != nil {
			problems = append(problems, fmt.Errorf("StopContainer %s: %w", ctr.Id, err))
		}
		if _, err := r.RuntimeService.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: ctr.Id}); err != nil {
			problems = append(problems, fmt.Errorf("RemoveContainer %s: %w", ctr.Id, err))
		}
	}
	sl, err := r.RuntimeService.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(problems, fmt.Errorf("ListPodSandbox: %w", err))...)
	}
	for _, s := range sl.Items {
		if _, err := r.RuntimeService.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			problems = append(problems, fmt.Errorf("StopPodSandbox %s: %w", s.Id, err))
		}
		if _, err := r.RuntimeService.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			problems = append(problems, fmt.Errorf("RemovePodSandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(problems...)
}

// stopContainerd stops containerd: SIGTERM to its process group, SIGKILL
// after stopTimeout (not a failure: its state dies with it and the sweep
// follows); a containerd that outlives SIGKILL is.
func (r *Runtime) stopContainerd() error {
	if !r.alive() {
		return nil
	}
	if _, err := r.proc.Stop(stopTimeout); err != nil {
		return fmt.Errorf("containerd (pid %d): %w", r.proc.Cmd.Process.Pid, err)
	}
	return nil
}

// leftoverPIDs returns the live processes that belong to this Runtime: those
// whose command line names its directory (containerd, shims, runc, ctr) and
// those in its pods' cgroups (sandbox and container processes, execs).
func (r *Runtime) leftoverPIDs() []int {
	self := os.Getpid()
	seen := map[int]bool{}
	var pids []int
	addPID := func(pid int) {
		if pid <= 0 || pid == self || seen[pid] || isZombie(pid) {
			return
		}
		seen[pid] = true
		pids = append(pids, pid)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), r.Dir) {
			addPID(pid)
		}
	}
	for _, pid := range CgroupPIDs(r.podCgroupTrees()) {
		addPID(pid)
	}
	slices.Sort(pids)
	return pids
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// mount is one line of /proc/self/mountinfo.
func mountInfo() ([]mountinfo.Mount, error) { return mountinfo.Self() }

// mountsBelow returns the mount points at or below r.Dir and the pods'
// network namespace files, most recent first.
func (r *Runtime) mountsBelow() []string {
	mounts, err := mountInfo()
	if err != nil {
		return nil
	}
	targets := map[string]bool{}
	for _, p := range r.netnsFiles() {
		targets[p] = true
	}
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i].MountPoint
		if m == r.Dir || strings.HasPrefix(m, r.Dir+"/") || targets[m] {
			out = append(out, m)
		}
	}
	return out
}

// unmountAll lazily unmounts everything below r.Dir and the pods' netns
// bind mounts.
func (r *Runtime) unmountAll() error {
	for range 10 {
		mounts := r.mountsBelow()
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	if left := r.mountsBelow(); len(left) > 0 {
		return fmt.Errorf("still mounted: %v", left)
	}
	return nil
}

// netnsFiles returns the resolved paths of the pods' netns bind mounts
// (/var/run/netns/cni-* → /run/netns/cni-*).
func (r *Runtime) netnsFiles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.pods {
		if p.NetNSPath == "" {
			continue
		}
		path := p.NetNSPath
		if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
			path = filepath.Join(dir, filepath.Base(path))
		}
		out = append(out, path)
	}
	return out
}

// removeNetNSFiles removes the netns files containerd failed to remove.
func (r *Runtime) removeNetNSFiles() error {
	var problems []error
	for _, path := range r.netnsFiles() {
		if !strings.HasPrefix(filepath.Base(path), "cni-") {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// removeShimSockets removes shim sockets and libcni result caches of our
// sandboxes that a killed shim or an interrupted CNI DEL left behind.
func (r *Runtime) removeShimSockets() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.ID == "" {
			continue
		}
		sum := sha256.Sum256([]byte(filepath.Join(r.Socket, k8sNamespace, p.ID)))
		os.Remove(filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum)))
		os.Remove(filepath.Join(cniCacheDir, "results", cniNetworkName+"-"+p.ID+"-eth0"))
		os.Remove(filepath.Join(cniCacheDir, "results", "cni-loopback-"+p.ID+"-lo"))
	}
}

// hostDirs are directories outside Runtime.Dir that containerd, its shims
// or libcni create on first use. Cleanup removes those that did not exist
// when Start ran, if they are empty by then (another Runtime still using
// them keeps them busy).
var hostDirs = []string{shimSocketDir, filepath.Dir(shimSocketDir), filepath.Join(cniCacheDir, "results"), cniCacheDir, "/run/netns"}

// Missing returns the paths that do not exist now: a setup's record of what
// it creates, for its cleanup to remove once empty.
func Missing(paths []string) []string {
	var out []string
	for _, d := range paths {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			out = append(out, d)
		}
	}
	return out
}

// removeHostDirs removes the empty directories of r.createdDirs, deepest
// first (hostDirs is in that order).
func (r *Runtime) removeHostDirs() {
	for _, d := range r.createdDirs {
		unix.Rmdir(d)
	}
}

// CgroupMounts returns the mount points of the cgroup v1 hierarchies and of
// the cgroup2 (unified) hierarchy whose root is the hierarchy root.
func CgroupMounts() []string {
	mounts, err := mountInfo()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && m.Root == "/" && !slices.Contains(out, m.MountPoint) {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// podCgroupTrees returns every existing cgroup directory of our pods, in
// every hierarchy, deepest first.
func (r *Runtime) podCgroupTrees() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.pods {
		out = append(out, CgroupTree(p.CgroupParent)...)
	}
	return out
}

// removeCgroups removes our pods' cgroup trees (deepest first) in every
// hierarchy, then besteffort and kubepods where they are empty: runc creates
// the cgroup parent but nothing removes it (a kubelet would). Other users of
// kubepods (another Runtime, a real kubelet) keep it busy, so rmdir fails
// harmlessly there.
func (r *Runtime) removeCgroups() error {
	err := RemoveCgroupDirs(r.podCgroupTrees())
	for _, mnt := range CgroupMounts() {
		unix.Rmdir(filepath.Join(mnt, "kubepods", "besteffort"))
		unix.Rmdir(filepath.Join(mnt, "kubepods"))
	}
	return err
}

// CgroupTree returns every existing directory of the cgroup rel (a path
// below the hierarchies' roots) in every hierarchy, deepest first.
func CgroupTree(rel string) []string {
	var dirs []string
	for _, mnt := range CgroupMounts() {
		filepath.WalkDir(filepath.Join(mnt, rel), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs
}

// CgroupPIDs returns the processes in the cgroup directories dirs.
func CgroupPIDs(dirs []string) []int {
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// RemoveCgroupDirs removes dirs in their order (CgroupTree's: deepest
// first), each retried for up to 2 s while a just-killed task leaves it.
func RemoveCgroupDirs(dirs []string) error {
	var problems []error
	for _, d := range dirs {
		var err error
		for range 100 {
			if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(problems...)
}

// deleteLink deletes the network interface name (RTM_DELLINK over rtnetlink)
// if it exists.
func deleteLink(name string) error {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "ifindex"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	index, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))                       // nlmsg_len
	ne.PutUint16(msg[4:], unix.RTM_DELLINK)                       // nlmsg_type
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)      // nlmsg_flags
	ne.PutUint32(msg[8:], 1)                                      // nlmsg_seq
	msg[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC                       // ifi_family
	ne.PutUint32(msg[unix.NLMSG_HDRLEN+4:], uint32(int32(index))) // ifi_index
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("RTM_DELLINK %s: %w", name, err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("RTM_DELLINK %s: %w", name, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if errno := -int32(ne.Uint32(m.Data[0:4])); errno != 0 && syscall.Errno(errno) != unix.ENODEV {
				return fmt.Errorf("RTM_DELLINK %s: %w", name, syscall.Errno(errno))
			}
		}
	}
	return nil
}
