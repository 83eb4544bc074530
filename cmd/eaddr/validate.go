package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Flags that name something on the node are checked at start: a filter
// that can never match, or a socket that is not there, is a usage error,
// not silence or a warning at the first event.

// checkCgroupFlag: cgroup v2 paths as eaddr prints them start with "/".
func checkCgroupFlag(prefix string) error {
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		return usageErrorf("--cgroup %q matches nothing: cgroup paths start with /, e.g. /kubepods.slice or /%s", prefix, prefix)
	}
	return nil
}

// checkCRIFlag: an explicit --cri-endpoint must be a unix socket now.
func checkCRIFlag(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	path := strings.TrimPrefix(endpoint, "unix://")
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return usageErrorf("--cri-endpoint %s: %v", endpoint, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return usageErrorf("--cri-endpoint %s is not a unix socket", endpoint)
	}
	return nil
}

// parseNetNSFlag reads --netns, the same in every command: inodes, or names
// of /run/netns mounts (ip netns add), each a network namespace that exists
// now. A value that names none is a usage error (exit 2) in every command.
func parseNetNSFlag(values []string) ([]uint64, error) {
	var inodes []uint64
	for _, v := range values {
		v = strings.TrimSpace(v)
		if n, err := strconv.ParseUint(v, 10, 32); err == nil {
			if err := checkNetNSFlag(uint32(n)); err != nil {
				return nil, err
			}
			inodes = append(inodes, n)
			continue
		}
		inode, err := namedNetNS(v)
		if err != nil {
			return nil, err
		}
		inodes = append(inodes, inode)
	}
	return inodes, nil
}

// namedNetNS is the inode of the netns mounted at /run/netns/NAME.
func namedNetNS(name string) (uint64, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return 0, usageErrorf("--netns %q is neither a namespace inode nor a name in /run/netns", name)
	}
	var self, st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return 0, fmt.Errorf("--netns: %w", err)
	}
	for _, dir := range []string{"/run/netns/", "/var/run/netns/"} {
		if err := unix.Stat(dir+name, &st); err == nil && st.Dev == self.Dev {
			return st.Ino, nil
		}
	}
	return 0, usageErrorf("--netns %q is neither a namespace inode nor a name in /run/netns (ip netns list shows them)", name)
}

// checkNetNSFlag: the inode must be a network namespace that exists now.
// A netns lives while a task is in it, a file (nsfs bind mount, open fd)
// refers to it, or a socket made in it is open; eaddr looks for the first
// three. Without CAP_SYS_PTRACE, other users' processes cannot be looked
// into: then eaddr cannot know and lets the flag through (the missing
// privilege is reported next). Namespace inodes are proc inode numbers, all
// at least minNSInode: smaller numbers are never one.
func checkNetNSFlag(inode uint32) error {
	if inode == 0 {
		return nil
	}
	const hint = "the inode is what `stat -L -c %i /proc/PID/ns/net` prints"
	if inode < minNSInode {
		return usageErrorf("--netns %d is not a namespace inode (they are from %d up); %s", inode, uint32(minNSInode), hint)
	}
	found, denied := findNetNS(uint64(inode))
	if found {
		return nil
	}
	if denied > 0 && !hasCapability(unix.CAP_SYS_PTRACE) {
		return nil
	}
	seen := ""
	if denied > 0 {
		seen = fmt.Sprintf(" (%d entries could not be read)", denied)
	}
	return usageErrorf("--netns %d: no network namespace with this inode in /proc/*/ns/net, /proc/*/task/*/ns/net, open files or /run/netns%s; %s", inode, seen, hint)
}

// minNSInode is the smallest inode a namespace gets: the kernel numbers them
// from 0xF0000000 (PROC_DYNAMIC_FIRST), and the initial namespaces just below.
const minNSInode = 0xEFFFFF00

// findNetNS looks for inode among live tasks, nsfs bind mounts and open fds;
// denied counts the entries it could not read.
func findNetNS(inode uint64) (found bool, denied int) {
	var self unix.Stat_t // nsfs's device, so a plain file with that inode number does not count
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return false, 1
	}
	match := func(path string) bool {
		var st unix.Stat_t
		err := unix.Stat(path, &st)
		if errors.Is(err, fs.ErrPermission) {
			denied++
		}
		return err == nil && st.Ino == inode && st.Dev == self.Dev
	}
	for _, g := range []string{"/proc/[0-9]*/ns/net", "/run/netns/*", "/var/run/netns/*", "/proc/[0-9]*/task/[0-9]*/ns/net"} {
		paths, _ := filepath.Glob(g)
		for _, p := range paths {
			if match(p) {
				return true, 0
			}
		}
	}
	link := "net:[" + strconv.FormatUint(inode, 10) + "]"
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, pid := range pids {
		fds, err := os.ReadDir(pid + "/fd")
		if errors.Is(err, fs.ErrPermission) {
			denied++
		}
		for _, fd := range fds {
			if l, err := os.Readlink(pid + "/fd/" + fd.Name()); err == nil && l == link {
				return true, 0
			}
		}
	}
	return false, denied
}

// hasCapability reports whether this process has capability c in effect.
func hasCapability(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}
