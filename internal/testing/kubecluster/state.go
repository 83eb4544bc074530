package kubecluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/eaddr/eaddr/internal/testing/critest"
)

// State is everything a cluster changed on the host, written to a JSON file
// before each change is made, so that Teardown can undo it from the file
// alone: from the test's cleanup, from `make cluster-down` in another shell,
// or after the process that started the cluster was killed.
type State struct {
	Dir           string            `json:"dir"`             // the cluster's directory, removed last
	Owner         Proc              `json:"owner"`           // the process that started the cluster
	CRISocket     string            `json:"cri_socket"`      // containerd's socket (host path)
	ConfigPath    string            `json:"config_path"`     // containerd's config.toml, to restart it for cleanup
	CgroupRoot    string            `json:"cgroup_root"`     // the kubelet's --cgroup-root, e.g. /eaddr-kubelet
	PodSubnet     string            `json:"pod_subnet"`      // the CNI bridge's subnet
	KubeProxy     string            `json:"kube_proxy"`      // its binary, for kube-proxy --cleanup
	Procs         []Proc            `json:"procs"`           // started processes, in start order
	Bridges       []string          `json:"bridges"`         // links to delete
	Sysctls       map[string]string `json:"sysctls"`         // /proc/sys path -> value before start
	Created       []string          `json:"created"`         // host paths that did not exist before start
	Iptables      bool              `json:"iptables"`        // KUBE-* chains may have been made
	PodLogsDir    string            `json:"pod_logs_dir"`    // the kubelet's podLogsDir
	PodLogsBefore []string          `json:"pod_logs_before"` // its entries before start (when it is not below Dir)
	NftTables     []string          `json:"nft_tables"`      // nftables tables before start
	OwnNftTables  []string          `json:"own_nft_tables"`  // tables a test made (AddNftTable), to delete

	path string
	mu   sync.Mutex
}

// Proc is a process by pid and start time (field 22 of /proc/PID/stat),
// so that a reused pid is never signalled.
type Proc struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// save writes the state file (atomically: a reader never sees half of it).
func (s *State) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// change runs f on the state under its lock and saves it.
func (s *State) change(f func()) error {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	return s.save()
}

// ReadState reads a state file that Start wrote.
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &State{path: path}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Dir == "" || !strings.HasPrefix(s.Dir, "/") {
		return nil, fmt.Errorf("%s: no cluster directory in it", path)
	}
	return s, nil
}

// procStart is the start time of pid in clock ticks since boot, 0 when it
// is gone or a zombie.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// procOf returns pid as a Proc named name.
func procOf(name string, pid int) Proc { return Proc{Name: name, Pid: pid, Start: procStart(pid)} }

// alive reports whether p still runs (same pid, same start time).
func (p Proc) alive() bool { return p.Pid > 0 && p.Start != 0 && procStart(p.Pid) == p.Start }

// hostPaths are what a node's components create outside the cluster's
// directory on first use. Start records those that are missing; Teardown
// removes them: the ones in shared (also used by internal/testing/critest or a
// system containerd) only when empty.
var hostPaths = []string{
	"/run/containerd", "/run/containerd/s", "/run/netns", "/var/lib/cni", "/var/lib/cni/results",
	"/var/lib/cni/networks", "/var/log/containers", "/var/log/pods", "/var/lib/kubelet",
	"/run/xtables.lock", "/var/run/kubernetes", "/etc/kubernetes",
}

var shared = map[string]bool{"/run/containerd/s": true, "/run/netns": true, "/var/lib/cni": true,
	"/var/lib/cni/results": true, "/var/lib/cni/networks": true, "/run/containerd": true}

// missingPaths returns the hostPaths that do not exist now.
func missingPaths() []string { return critest.Missing(hostPaths) }

// removeCreated removes the recorded host paths, deepest first.
func (s *State) removeCreated() error {
	var problems []error
	for i := len(s.Created) - 1; i >= 0; i-- {
		p := s.Created[i]
		if shared[p] {
			os.Remove(p) // only if empty; a concurrent runtime may still use it
			continue
		}
		if p == "/var/log/containers" {
			// symlinks of our containers only (into s.Dir); then the directory if empty
			removeLinksInto(p, s.Dir)
			os.Remove(p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// removeLinksInto removes the symlinks in dir that point below target.
func removeLinksInto(dir, target string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if l, err := os.Readlink(p); err == nil && strings.HasPrefix(l, target+"/") {
			os.Remove(p)
		}
	}
}

// dirEntries lists the names in dir (none when it does not exist).
func dirEntries(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// removePodLogs removes the pods' log directories the cluster added to a
// podLogsDir outside its own directory, and the directory if it made it.
func (s *State) removePodLogs() error {
	if s.PodLogsDir == "" || strings.HasPrefix(s.PodLogsDir, s.Dir+"/") {
		return nil
	}
	var problems []error
	for _, name := range dirEntries(s.PodLogsDir) {
		if !slices.Contains(s.PodLogsBefore, name) {
			removeLinksInto("/var/log/containers", filepath.Join(s.PodLogsDir, name))
			if err := os.RemoveAll(filepath.Join(s.PodLogsDir, name)); err != nil {
				problems = append(problems, err)
			}
		}
	}
	return errors.Join(problems...)
}
