package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/child"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stopGrace is how long a component has after SIGTERM.
const stopGrace = 10 * time.Second

// Teardown undoes everything the state records, in an order that lets each
// component clean up after what it made: kube-proxy and the kubelet stop
// first, the pods are removed through CRI (containerd runs their CNI DEL and
// removes their network namespaces and mounts; it is started again for that
// when it is gone), then containerd and the control plane stop. What is left
// is swept: processes in the kubelet's cgroup root or started from the
// cluster's directory, mounts below it, KUBE-* iptables chains, changed
// sysctls, the bridges, the cgroups and the host paths the components
// created. Each step runs even when an earlier one failed; the error joins
// every problem. Safe to run again.
func Teardown(s *State, logf func(string, ...any)) error {
	var problems []error
	add := func(err error) {
		if err != nil {
			problems = append(problems, err)
		}
	}
	if s.Owner.alive() && s.Owner.Pid != os.Getpid() {
		// The cluster-up process restores the host itself on SIGTERM.
		logf("stopping the process that runs the cluster (pid %d)", s.Owner.Pid)
		syscall.Kill(s.Owner.Pid, syscall.SIGTERM)
		if !waitGone(s.Owner, 2*time.Minute) {
			add(fmt.Errorf("pid %d did not exit within 2 minutes of SIGTERM", s.Owner.Pid))
		}
	}
	procs := slices.Clone(s.Procs)
	slices.Reverse(procs)
	for _, p := range procs {
		if p.Name == "containerd" {
			add(s.removePods(p, logf))
		}
		add(stopProc(p, stopGrace, logf))
	}
	add(child.Sweep(func() []int { return s.leftoverPIDs() }, 15*time.Second))
	add(unmountBelow(s.Dir))
	if s.Iptables {
		add(s.cleanupIptables())
		add(removeEmptyXtables(s.NftTables))
	}
	add(s.deleteOwnNftTables())
	add(restoreSysctls(s.Sysctls))
	for _, b := range s.Bridges {
		add(deleteLink(b))
	}
	if s.CgroupRoot != "" {
		add(removeCgroups(s.CgroupRoot))
	}
	removeLinksInto("/var/log/containers", s.Dir)
	add(s.removePodLogs())
	s.removeCNIResults()
	if s.CRISocket != "" && !slices.ContainsFunc(s.Procs, Proc.alive) {
		os.Remove(s.CRISocket)
		os.Remove(s.CRISocket + ".ttrpc")
	}
	removeStaleSockets("/run/containerd/s")
	add(s.removeCreated())
	if left := mountsBelow(s.Dir, nil); len(left) > 0 {
		add(fmt.Errorf("not removing %s: still mounted: %v", s.Dir, left)) // never RemoveAll through a mount
	} else if err := os.RemoveAll(s.Dir); err != nil {
		add(err)
	}
	if !strings.HasPrefix(s.path, s.Dir+"/") {
		os.Remove(s.path)
	}
	return errors.Join(problems...)
}

// leftoverPIDs are the processes of the cluster still alive: those in the
// kubelet's cgroup root (pods), the shims of its containerd, and anything
// whose command line names its directory.
func (s *State) leftoverPIDs() []int {
	pids := processesMatching(s.Dir + "/")
	if s.CRISocket != "" {
		pids = append(pids, processesMatching("-address "+s.CRISocket)...)
	}
	if s.CgroupRoot != "" {
		pids = append(pids, cgroupPIDs(s.CgroupRoot)...)
	}
	self := os.Getpid()
	return slices.DeleteFunc(pids, func(p int) bool { return p == self || procStart(p) == 0 })
}

// removePods stops and removes every pod sandbox through CRI, so that
// containerd runs CNI DEL and removes the sandboxes' network namespaces and
// mounts. When containerd is gone (its owner was killed), it is started again
// from its config for this.
func (s *State) removePods(p Proc, logf func(string, ...any)) error {
	if !p.alive() {
		if s.ConfigPath == "" {
			return nil
		}
		if _, err := os.Stat(s.ConfigPath); err != nil {
			return nil
		}
		logf("containerd is not running: starting it again to remove the pods")
		cp, err := startProcess("containerd", filepath.Join(s.Dir, "containerd-cleanup.log"), "containerd", "--config", s.ConfigPath)
		if err != nil {
			return err
		}
		p = procOf("containerd", cp.Cmd.Process.Pid)
		defer stopProc(p, stopGrace, logf)
	}
	conn, err := grpc.NewClient("unix://"+s.CRISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var list *runtimeapi.ListPodSandboxResponse
	for {
		list, err = rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err == nil || ctx.Err() != nil || !p.alive() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("removing pods: ListPodSandbox: %w", err)
	}
	var problems []error
	for _, sb := range list.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			problems = append(problems, fmt.Errorf("StopPodSandbox %s: %w", sb.Id, err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			problems = append(problems, fmt.Errorf("RemovePodSandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(problems...)
}

// cleanupIptables runs kube-proxy --cleanup, then removes what is left of
// the KUBE-* chains (the kubelet's too) in every backend and family.
func (s *State) cleanupIptables() error {
	var problems []error
	if s.KubeProxy != "" {
		cmd := exec.Command(s.KubeProxy, "--cleanup")
		cmd.Env = []string{"PATH=" + hostPath}
		if out, err := cmd.CombinedOutput(); err != nil {
			// Not fatal: removeKubeChains below checks the result.
			problems = append(problems, fmt.Errorf("kube-proxy --cleanup: %v: %s", err, lastLines(string(out), 5)))
		}
	}
	if err := removeKubeChains(); err != nil {
		return errors.Join(append(problems, err)...)
	}
	return nil // what --cleanup missed is gone
}

// removeCNIResults removes libcni's cached results of the cluster's network.
func (s *State) removeCNIResults() {
	entries, _ := os.ReadDir("/var/lib/cni/results")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), cniNetwork(s.Dir)+"-") {
			os.Remove(filepath.Join("/var/lib/cni/results", e.Name()))
		}
	}
}

// cniNetwork is the CNI network's name: one per cluster directory.
func cniNetwork(dir string) string {
	return "eaddr-kc-" + strings.TrimPrefix(filepath.Base(dir), "eaddr-kc-")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeStaleSockets removes the sockets in dir that nothing listens on: the
// shims' (/run/containerd/s/<hash>, whatever containerd's state directory),
// which a killed shim leaves. A live runtime's (internal/testing/critest's, a
// system containerd's) are bound and stay.
func removeStaleSockets(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	bound, _ := os.ReadFile("/proc/net/unix")
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSocket != 0 && !strings.Contains(string(bound), " "+p+"\n") {
			os.Remove(p)
		}
	}
}

// StateGlob finds the state files of the clusters tests start (their own
// directory's state.json); DefaultStatePath is `make cluster-up`'s.
const (
	StateGlob        = "/tmp/eaddr-kc-*/state.json"
	DefaultStatePath = "/run/eaddr-kubecluster.json"
)

// TeardownStale tears down every cluster whose state file is left while the
// process that started it is gone: a test binary killed by -timeout or a
// signal (its t.Cleanup never ran), a cluster-up killed with SIGKILL. Start
// calls it holding LockPath, so no live cluster is touched.
func TeardownStale(logf func(string, ...any)) error {
	paths, _ := filepath.Glob(StateGlob)
	if _, err := os.Stat(DefaultStatePath); err == nil {
		paths = append(paths, DefaultStatePath)
	}
	var problems []error
	for _, p := range paths {
		s, err := ReadState(p)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if s.Owner.alive() {
			continue
		}
		logf("kubecluster: the process that started the cluster of %s (pid %d) is gone: restoring the host from it", p, s.Owner.Pid)
		if err := Teardown(s, logf); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(problems...)
}
