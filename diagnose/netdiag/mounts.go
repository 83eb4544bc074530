package netdiag

import (
	"path"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/internal/netns"
)

// RunNetNS is where `ip netns add NAME` mounts a network namespace (and
// CNI plugins their pods' ones): /run/netns/NAME.
const RunNetNS = "/run/netns"

// NetNSMounts maps each network namespace mounted in eaddr's mount
// namespace (nsfs mounts: `ip netns add`, CNI, a runtime's own) to its
// mount point, one under /run/netns when it has several. Such a netns can
// have no process in it at all and still hold sockets (of processes in
// other netns) and settings: it is entered through the mount.
func NetNSMounts() (map[uint64]string, error) {
	mounts, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	out := map[uint64]string{}
	for _, m := range mounts {
		inner, ok := strings.CutPrefix(m.Root, "net:[")
		if m.FSType != "nsfs" || !ok || !strings.HasSuffix(inner, "]") {
			continue
		}
		inode, err := strconv.ParseUint(strings.TrimSuffix(inner, "]"), 10, 64)
		if err != nil {
			continue
		}
		if prev, ok := out[inode]; !ok || (path.Dir(prev) != RunNetNS && path.Dir(m.MountPoint) == RunNetNS) {
			out[inode] = m.MountPoint
		}
	}
	return out, nil
}

// openMounted enters the netns through its mount when no process is in it
// (nil when it has none, or the file there is another netns by now).
func openMounted(inode uint64) *Netns {
	mounts, err := NetNSMounts()
	if err != nil || mounts[inode] == "" {
		return nil
	}
	ns, err := netns.Open(mounts[inode])
	if err != nil {
		return nil
	}
	if ns.Inode() != inode {
		ns.Close()
		return nil
	}
	return &Netns{ns: ns, inode: inode}
}
