package diagnose

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
)

// Whose a network namespace is decides how a sysctl fix is applied: a
// pod's through its spec (the kubelet sets the sysctls when it makes the
// pod's netns), the node's with sysctl -w and /etc/sysctl.d, any other
// (a container outside Kubernetes, `ip netns add`, eaddr demo's) from
// inside it with nsenter.
type ownerKind int

const (
	ownerUnknown ownerKind = iota // eaddr cannot tell: owner.why says why
	ownerHost
	ownerPod
	ownerOther
)

// owner is whose a netns is, and how to enter it.
type owner struct {
	kind  ownerKind
	pid   int    // ownerOther, ownerUnknown: a process in the netns (nsenter -t PID -n), 0 if none is known
	mount string // ownerOther, ownerUnknown: its mount (ip netns add, a runtime's), "" if none or not usable in a command
	why   string // ownerUnknown: why eaddr cannot tell
}

// podByNetNS is what the runtime's resolver (kube.Resolver) answers of a
// netns: the pod whose sandbox it is. Diagnoser.Pods may have it.
type podByNetNS interface {
	PodByNetNS(inode uint64) (*decode.Pod, bool)
}

// ownerOf says whose ns is: the host's by its inode; a pod's when the
// failing process's pod owns it (hint, nil when none), when a process in
// it runs in a pod's cgroup (a pod's sandbox "pause" process does), or
// when the runtime names its pod; else another's, once every process
// that could be a pod's was looked at within HoldersWait.
func (d *Diagnoser) ownerOf(ns *netdiag.Netns, hint *decode.Pod) owner {
	inode := ns.Inode()
	if d.HostNetNS != 0 && inode == d.HostNetNS {
		return owner{kind: ownerHost}
	}
	if hint != nil && hint.UID != "" && (hint.NetNS == 0 || hint.NetNS == inode) {
		return owner{kind: ownerPod}
	}
	if uid, _ := PodOfProcess(ns.PID()); uid != "" {
		return owner{kind: ownerPod}
	}
	m := membersOf(inode, d.HoldersWait)
	if m.pod {
		return owner{kind: ownerPod}
	}
	if r, ok := d.Pods.(podByNetNS); ok {
		if _, found := r.PodByNetNS(inode); found {
			return owner{kind: ownerPod}
		}
	}
	o := owner{kind: ownerOther, pid: m.first, mount: mountOf(inode)}
	if o.pid == 0 {
		o.pid = ns.PID()
	}
	switch {
	case d.HostNetNS == 0:
		o.kind, o.why = ownerUnknown, "the node's own network namespace is not known to eaddr (no hostPID?), and this may be it"
	case m.why != "":
		o.kind, o.why = ownerUnknown, m.why
	}
	return o
}

// shellSafe is a mount path that can go into a command as it is.
var shellSafe = regexp.MustCompile(`^/[A-Za-z0-9/._:+-]+$`)

// mountOf is the netns's mount (netdiag.NetNSMounts), when it has one whose
// path a command can take as it is.
func mountOf(inode uint64) string {
	mounts, err := netdiag.NetNSMounts()
	if err != nil || !shellSafe.MatchString(mounts[inode]) {
		return ""
	}
	return mounts[inode]
}

// members is what a walk of /proc found of one netns's processes.
type members struct {
	pod   bool   // a process in it runs in a pod's cgroup
	first int    // the lowest pid in it (0: none seen)
	why   string // why a process that may be a pod's in it was not seen: "" when none
}

// membersOf walks /proc for the processes in the netns inode until one
// runs in a pod's cgroup, or the time budget is spent (<= 0: no limit, as
// for Holders). A process whose netns cannot be read (some sandboxes hide
// pid 1's even from root) counts only when its cgroup is a pod's: then it
// may be the pod's, and why says so.
func membersOf(inode uint64, budget time.Duration) members {
	var m members
	deadline := time.Now().Add(budget)
	err := eachProcNetNS(func(pid int, ino uint64, err error) bool {
		if err != nil {
			if uid, _ := PodOfProcess(pid); uid != "" && m.why == "" {
				m.why = "the network namespace of pid " + strconv.Itoa(pid) + ", a pod's process, could not be read: " + err.Error()
			}
		} else if ino == inode {
			if m.first == 0 || pid < m.first {
				m.first = pid
			}
			if uid, _ := PodOfProcess(pid); uid != "" {
				m.pod = true
				return false
			}
		}
		if budget > 0 && time.Now().After(deadline) {
			m.why = "not every process was looked at within the time budget"
			return false
		}
		return true
	})
	if err != nil && !m.pod {
		m.why = "the processes could not be listed: " + err.Error()
	}
	return m
}

// eachProcNetNS calls fn for every process of /proc with the inode of its
// network namespace, or why that could not be read (a process that exits
// meanwhile is left out), until fn returns false.
func eachProcNetNS(fn func(pid int, ino uint64, err error) bool) error {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		err = unix.Stat(filepath.Join("/proc", d.Name(), "ns/net"), &st)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue
		}
		if !fn(pid, st.Ino, err) {
			return nil
		}
	}
	return nil
}
