package pod

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/pod/kube"
)

// PodMapper attributes events to Kubernetes pods, and never guesses:
//   - the cgroup decides: a pod cgroup path gives the pod UID, QoS and
//     container ID, and the runtime (CRI) adds names; a cgroup that is known
//     and not a pod's means no pod from the cgroup;
//   - where cgroup v2 says nothing (the v2 root on a host with cgroup v1
//     controllers), /proc/PID/cgroup is read, only while PID is still the
//     process that failed (same start time);
//   - netns -> pod is used only for a process outside any pod cgroup, never in
//     the host netns, and only by the netns cookie, which is never reused
//     (inodes are): learned from events whose pod the cgroup decided, or from
//     the runtime's sandboxes; a netns seen with two pods is never used;
//   - otherwise Event.PodUnresolved says why there is no answer, unless the
//     node has no pods at all (PodCgroups): a process on such a node is in
//     no pod, and its event says nothing about pods.
//
// Not safe for concurrent use.
type PodMapper struct {
	CRI       *kube.Resolver // nil: no names
	HostNetNS uint64
	Proc      string // "/proc"
	// CgroupV1 is true when cgroup v1 hierarchies are mounted: a process in
	// the cgroup v2 root may then be in a pod's v1 cgroups.
	CgroupV1 bool
	// PodsPossible says whether the node has pods (PodCgroups), asked only
	// when the cgroup says nothing, and at most once per podsCheckEvery.
	PodsPossible func() bool

	byCgroup map[uint64]*cgroupEntry // cgroup ids are never reused
	byCookie map[uint64]*netnsEntry  // netns cookie -> pod, learned
	byPID    map[pidKey]*cgroupEntry // /proc/PID/cgroup answers, per process
	max      int
	now      func() time.Time
	pods     bool      // the last answer of PodCgroups
	podsAt   time.Time // when it was asked
}

type pidKey struct {
	pid   uint32
	start uint64
}

type cgroupEntry struct {
	parsed kube.CgroupPod
	ok     bool
	base   *decode.Pod // from the cgroup alone
	criKey string      // what the runtime is asked for (kube.Key), built once
	named  *decode.Pod // with the runtime's names, once known
}

type netnsEntry struct {
	pod       *decode.Pod // pod-level: no container
	ambiguous bool        // seen with two pods: never used
}

// NamesWait is the reason given when the runtime had not answered by the time
// the event had to go out.
const NamesWait = "the container runtime did not answer in time"

// NewPodMapper returns a PodMapper; cri may be nil.
func NewPodMapper(cri *kube.Resolver, hostNetNS uint64) *PodMapper {
	return &PodMapper{CRI: cri, HostNetNS: hostNetNS, Proc: "/proc",
		byCgroup: map[uint64]*cgroupEntry{}, byCookie: map[uint64]*netnsEntry{}, byPID: map[pidKey]*cgroupEntry{},
		max: 65536, now: time.Now, PodsPossible: nodeHasPods}
}

// Map sets ev.Pod, ev.HostNetwork and the reasons when something is not
// known. final means the event goes out now: names the runtime has not given
// yet are reported as unresolved instead of asked for. Map returns true when
// it asked the runtime for names that may come soon: the caller may hold the
// event and Map it again. It does not allocate once a cgroup's answer is cached.
func (m *PodMapper) Map(ev *decode.Event, final bool) (pending bool) {
	ev.Pod, ev.PodVia, ev.PodUnresolved, ev.PodNamesUnresolved = nil, "", "", ""
	ev.HostNetwork = m.HostNetNS != 0 && uint64(ev.NetNS) == m.HostNetNS
	e, why := m.cgroup(ev)
	if e == nil {
		if m.podsPossible() {
			ev.PodUnresolved = why
		}
		return false
	}
	if e.ok {
		pending = m.fromCgroup(ev, e, final)
		m.learn(ev)
		return pending
	}
	m.fromNetNS(ev)
	return false
}

// cgroup is what the event's cgroup says, or nil and why nothing can be said.
func (m *PodMapper) cgroup(ev *decode.Event) (*cgroupEntry, string) {
	if e := m.byCgroup[ev.CgroupID]; e != nil {
		return e, ""
	}
	path := ev.CgroupPath
	if path == "" || (path == "/" && m.CgroupV1) {
		// cgroup v2 says nothing: the process's own file, if it still is.
		e, why := m.pidCgroup(ev)
		if e == nil {
			if path == "" {
				return nil, "cgroup " + strconv.FormatUint(ev.CgroupID, 10) + " not resolved (" + ev.CgroupUnresolved + ") and " + why
			}
			return nil, "in the cgroup v2 root, and with cgroup v1 controllers mounted its pod cgroup is in v1 only, but " + why
		}
		return e, "" // per process, not per cgroup: not cached under the cgroup id
	}
	e := &cgroupEntry{}
	e.parsed, e.ok = kube.ParseCgroupPath(path)
	e.base, e.criKey = basePod(e.parsed), kube.Key(e.parsed.ContainerID, e.parsed.UID)
	if len(m.byCgroup) >= m.max {
		clear(m.byCgroup)
	}
	m.byCgroup[ev.CgroupID] = e
	return e, ""
}

func basePod(p kube.CgroupPod) *decode.Pod {
	return &decode.Pod{UID: p.UID, ContainerID: p.ContainerID, QoS: p.QoS, Runtime: p.Runtime}
}

// fromCgroup sets the pod from the cgroup and the runtime's names.
func (m *PodMapper) fromCgroup(ev *decode.Event, e *cgroupEntry, final bool) (pending bool) {
	if e.named != nil {
		ev.Pod = e.named
		return false
	}
	ev.Pod = e.base
	if m.CRI == nil {
		return false
	}
	info, st, why := m.CRI.Names(e.criKey)
	switch {
	case st == kube.Found && info.UID != "" && info.UID != e.parsed.UID:
		ev.PodNamesUnresolved = "the runtime names pod " + info.UID + " for this container, not the cgroup's " + e.parsed.UID
	case st == kube.Found:
		e.named = withNames(e.base, info)
		ev.Pod = e.named
	case st == kube.Pending && !final:
		return true
	case st == kube.Pending:
		ev.PodNamesUnresolved = NamesWait
	default:
		ev.PodNamesUnresolved = why
	}
	return false
}

// withNames is the pod the cgroup names (base) with the runtime's names
// (info): what the cgroup path says (UID, QoS, runtime) stays the path's, and
// a pod-level cgroup keeps no container.
func withNames(base, info *decode.Pod) *decode.Pod {
	c := *info
	c.UID, c.QoS, c.Runtime = base.UID, base.QoS, base.Runtime
	if base.ContainerID == "" {
		c.Container, c.ContainerID, c.Image = "", "", ""
	}
	return &c
}

// learn remembers the pod of the event's netns, by cookie.
func (m *PodMapper) learn(ev *decode.Event) {
	if ev.HostNetwork || ev.NetNSCookie == 0 || ev.Pod == nil {
		return
	}
	n := m.byCookie[ev.NetNSCookie]
	if n == nil {
		if len(m.byCookie) >= m.max {
			clear(m.byCookie)
		}
		p := *ev.Pod
		p.Container, p.ContainerID, p.Image = "", "", ""
		m.byCookie[ev.NetNSCookie] = &netnsEntry{pod: &p}
		return
	}
	switch {
	case n.ambiguous:
	case n.pod.UID != ev.Pod.UID:
		n.ambiguous = true
	case n.pod.Name == "" && ev.Pod.Name != "":
		p := *ev.Pod
		p.Container, p.ContainerID, p.Image = "", "", ""
		n.pod = &p
	}
}

// fromNetNS attributes a process outside any pod cgroup to the pod that owns
// its netns, when that is certain.
func (m *PodMapper) fromNetNS(ev *decode.Event) {
	if ev.HostNetwork || ev.NetNSCookie == 0 {
		return
	}
	if n := m.byCookie[ev.NetNSCookie]; n != nil {
		if !n.ambiguous {
			ev.Pod, ev.PodVia = n.pod, "netns"
		}
		return
	}
	if m.CRI != nil {
		if p, ok := m.CRI.PodByNetNSCookie(ev.NetNSCookie); ok {
			ev.Pod, ev.PodVia = p, "netns"
		}
	}
}

// maxPIDs bounds the per-process cache.
const maxPIDs = 4096

// CacheSizes reports the entries of each cache and the bound of each.
func (m *PodMapper) CacheSizes() (cgroups, netns, pids, bound, pidBound int) {
	return len(m.byCgroup), len(m.byCookie), len(m.byPID), m.max, maxPIDs
}

// pidCgroup reads /proc/PID/cgroup for a pod path, if PID is still the
// process of the event (same start time); otherwise nil and why not.
func (m *PodMapper) pidCgroup(ev *decode.Event) (*cgroupEntry, string) {
	if ev.StartBoottime == 0 {
		return nil, "the kernel did not give the process's start time to check /proc/PID against"
	}
	key := pidKey{ev.PID, ev.StartBoottime}
	if e := m.byPID[key]; e != nil {
		return e, ""
	}
	dir := m.Proc + "/" + strconv.FormatUint(uint64(ev.PID), 10)
	if !sameProcess(dir, ev.StartBoottime) {
		return nil, "the process has exited"
	}
	parsed, ok, err := procCgroup(dir)
	if err != nil || !sameProcess(dir, ev.StartBoottime) {
		return nil, "the process has exited"
	}
	if len(m.byPID) >= maxPIDs {
		clear(m.byPID)
	}
	e := &cgroupEntry{parsed: parsed, ok: ok, base: basePod(parsed), criKey: kube.Key(parsed.ContainerID, parsed.UID)}
	m.byPID[key] = e
	return e, ""
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's starttime: 100 on
// every Linux architecture eaddr runs on.
const clockTicks = 100

// sameProcess is true when dir (/proc/PID) is the process that started at
// startNs (ns since boot, the kernel's task start_boottime).
func sameProcess(dir string, startNs uint64) bool {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return false
	}
	// Fields after the comm, which may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return false
	}
	start, err := strconv.ParseUint(f[19], 10, 64) // field 22: starttime
	return err == nil && start == startNs/(1e9/clockTicks)
}

// procCgroup parses /proc/PID/cgroup (every hierarchy) for a pod path.
func procCgroup(dir string) (kube.CgroupPod, bool, error) {
	f, err := os.Open(dir + "/cgroup")
	if err != nil {
		return kube.CgroupPod{}, false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// hierarchy-ID:controllers:path
		_, rest, ok1 := strings.Cut(s.Text(), ":")
		_, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		if p, ok := kube.ParseCgroupPath(path); ok {
			return p, true, nil
		}
	}
	return kube.CgroupPod{}, false, s.Err()
}
