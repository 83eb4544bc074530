package decode

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eaddr/eaddr/decode/kube"
)

// PodMapper maps events to Kubernetes pods: from the cgroup path (offline:
// pod UID, QoS, container ID), then names from the container runtime over
// CRI, and for events whose cgroup says nothing (cgroup v1 hosts after the
// process exited, processes that share a pod's netns) from the netns of the
// pod's sandbox. It marks events in the node's own netns as host network.
// Not safe for concurrent use.
type PodMapper struct {
	CRI       *kube.Resolver // nil: no names
	HostNetNS uint64
	Proc      string // "/proc"

	byCgroup map[uint64]*cgroupEntry
	byNetNS  map[uint32]*kube.PodInfo // learned from events that had a pod
	byPID    map[uint32]pidEntry      // /proc/PID/cgroup answers, for PIDTTL
	max      int
	PIDTTL   time.Duration
	now      func() time.Time
}

type pidEntry struct {
	parsed kube.CgroupPod
	ok     bool
	at     time.Time
}

type cgroupEntry struct {
	parsed kube.CgroupPod
	ok     bool
	// pod is filled from the cgroup alone until CRI knows the container.
	pod *kube.PodInfo
}

// NewPodMapper returns a PodMapper; cri may be nil.
func NewPodMapper(cri *kube.Resolver, hostNetNS uint64) *PodMapper {
	return &PodMapper{CRI: cri, HostNetNS: hostNetNS, Proc: "/proc",
		byCgroup: map[uint64]*cgroupEntry{}, byNetNS: map[uint32]*kube.PodInfo{}, byPID: map[uint32]pidEntry{},
		max: 65536, PIDTTL: time.Second, now: time.Now}
}

// Map sets ev.Pod and ev.HostNetwork. It does not allocate once the cgroup
// and the runtime's answer are cached.
func (m *PodMapper) Map(ev *Event) {
	ev.Pod = nil
	ev.HostNetwork = m.HostNetNS != 0 && uint64(ev.NetNS) == m.HostNetNS
	e := m.byCgroup[ev.CgroupID]
	if e == nil {
		e = &cgroupEntry{}
		e.parsed, e.ok = kube.ParseCgroupPath(ev.CgroupPath)
		if len(m.byCgroup) >= m.max {
			clear(m.byCgroup)
		}
		if ev.CgroupPath != "" { // an unknown path may resolve later
			m.byCgroup[ev.CgroupID] = e
		}
	}
	parsed, ok := e.parsed, e.ok
	if !ok {
		// cgroup v1 (or the v2 root of a hybrid host): /proc/PID/cgroup
		// while the process lives.
		parsed, ok = m.pidCgroup(ev.PID)
	}
	if ok {
		ev.Pod = m.fromCgroup(e, parsed, ok && e.ok)
	}
	if ev.Pod == nil && !ev.HostNetwork {
		if p := m.byNetNS[ev.NetNS]; p != nil {
			ev.Pod = p
		} else if m.CRI != nil {
			if p, found := m.CRI.PodByNetNS(uint64(ev.NetNS)); found {
				ev.Pod = p
			}
		}
	}
	if ev.Pod != nil && !ev.HostNetwork {
		if _, known := m.byNetNS[ev.NetNS]; !known {
			if len(m.byNetNS) >= m.max {
				clear(m.byNetNS)
			}
			m.byNetNS[ev.NetNS] = &kube.PodInfo{UID: ev.Pod.UID, Name: ev.Pod.Name, Namespace: ev.Pod.Namespace, QoS: ev.Pod.QoS, Labels: ev.Pod.Labels}
		}
	}
}

func (m *PodMapper) fromCgroup(e *cgroupEntry, parsed kube.CgroupPod, cacheable bool) *kube.PodInfo {
	if cacheable && e.pod != nil && (e.pod.Name != "" || m.CRI == nil || parsed.ContainerID == "") {
		return e.pod
	}
	if m.CRI != nil && parsed.ContainerID != "" {
		// A hit is a map lookup; a miss refreshes at most once a second.
		if info, found := m.CRI.Lookup(parsed.ContainerID); found {
			c := *info
			c.QoS = parsed.QoS
			if c.UID == "" {
				c.UID = parsed.UID
			}
			if cacheable {
				e.pod = &c
			}
			return &c
		}
	}
	if cacheable && e.pod != nil {
		return e.pod
	}
	p := &kube.PodInfo{UID: parsed.UID, ContainerID: parsed.ContainerID, QoS: parsed.QoS}
	if cacheable {
		e.pod = p
	}
	return p
}

// maxPIDs bounds the per-pid cache: it holds answers for one second, so a
// few thousand pids are the busy ones.
const maxPIDs = 4096

// CacheSizes reports the entries of each cache and the bound of each.
func (m *PodMapper) CacheSizes() (cgroups, netns, pids, bound, pidBound int) {
	return len(m.byCgroup), len(m.byNetNS), len(m.byPID), m.max, maxPIDs
}

// pidCgroup is procCgroup cached per pid for PIDTTL: a storm of failures
// from one process reads its cgroup file once.
func (m *PodMapper) pidCgroup(pid uint32) (kube.CgroupPod, bool) {
	now := m.now()
	if e, ok := m.byPID[pid]; ok && now.Sub(e.at) < m.PIDTTL {
		return e.parsed, e.ok
	}
	parsed, ok := m.procCgroup(pid)
	if len(m.byPID) >= maxPIDs { // pids churn: keep only the recent ones
		clear(m.byPID)
	}
	m.byPID[pid] = pidEntry{parsed, ok, now}
	return parsed, ok
}

// procCgroup parses /proc/PID/cgroup (every hierarchy) for a pod path.
func (m *PodMapper) procCgroup(pid uint32) (kube.CgroupPod, bool) {
	f, err := os.Open(m.Proc + "/" + strconv.FormatUint(uint64(pid), 10) + "/cgroup")
	if err != nil {
		return kube.CgroupPod{}, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controllers:path
		line := s.Text()
		i := strings.IndexByte(line, ':')
		if i < 0 {
			continue
		}
		j := strings.IndexByte(line[i+1:], ':')
		if j < 0 {
			continue
		}
		if p, ok := kube.ParseCgroupPath(line[i+1+j+1:]); ok {
			return p, true
		}
	}
	return kube.CgroupPod{}, false
}
