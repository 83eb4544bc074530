package pod

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eaddr/eaddr/internal/mountinfo"
)

// podDepth is how deep under a hierarchy's root kubelets put their kubepods
// cgroup: /kubepods (cgroupfs), /kubepods.slice (systemd),
// /kubelet.slice/kubelet-kubepods.slice (kind, minikube), /<root>/kubepods
// (--cgroup-root).
const podDepth = 2

// PodCgroups says whether this node has pods at all: a cgroup named
// kubepods... within podDepth levels of the root of a mounted cgroup
// hierarchy (v1 or v2), and the first one found. Without one, no process here
// is in a pod: eaddr then says nothing about pods for a process whose cgroup
// it cannot see, and does not warn that the container runtime cannot be asked.
// A mount table that cannot be read counts as pods being possible.
func PodCgroups() (where string, found bool) {
	mounts, err := mountinfo.Self()
	if err != nil {
		return "the mount table (" + err.Error() + ")", true
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		if (m.FSType != "cgroup" && m.FSType != "cgroup2") || seen[m.MountPoint] {
			continue
		}
		seen[m.MountPoint] = true
		if where, found := findKubepods(m.MountPoint, podDepth); found {
			return where, true
		}
	}
	return "", false
}

// findKubepods looks for a directory whose name holds "kubepods" in dir and
// below it, depth levels down.
func findKubepods(dir string, depth int) (string, bool) {
	if depth == 0 {
		return "", false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if e.IsDir() && strings.Contains(e.Name(), "kubepods") {
			return filepath.Join(dir, e.Name()), true
		}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if where, found := findKubepods(filepath.Join(dir, e.Name()), depth-1); found {
			return where, true
		}
	}
	return "", false
}

// podsCheckEvery is how long PodMapper trusts an answer of PodCgroups: a
// kubelet started after eaddr makes its kubepods cgroup within it.
const podsCheckEvery = 10 * time.Second

// podsPossible is whether the node has pods: PodsPossible's answer, asked
// at most once per podsCheckEvery.
func (m *PodMapper) podsPossible() bool {
	now := m.now()
	if m.podsAt.IsZero() || now.Sub(m.podsAt) >= podsCheckEvery {
		m.pods, m.podsAt = m.PodsPossible(), now
	}
	return m.pods
}

// nodeHasPods is the default PodsPossible.
func nodeHasPods() bool {
	_, found := PodCgroups()
	return found
}
