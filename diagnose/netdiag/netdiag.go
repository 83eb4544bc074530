// Package netdiag takes snapshots of a Linux network namespace: its inet
// sockets (via NETLINK_SOCK_DIAG), its port sysctls, its addresses, and which
// processes hold given sockets.
//
// eaddr uses it to diagnose a failed connect() or bind() (EADDRNOTAVAIL,
// EADDRINUSE) inside the network namespace of the failing process, even after
// that process has exited: the namespace is reached through any live process
// still in it (see OpenNetns), e.g. the "pause" process of a Kubernetes pod.
//
// Network namespaces are per OS thread; every query that must happen inside
// the namespace runs on a dedicated thread switched into it (netns.NS.Do), so
// the caller's threads are never moved.
package netdiag

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/eaddr/eaddr/internal/netns"
	"golang.org/x/sys/unix"
)

// ErrNoProcess is wrapped by the error OpenNetns returns when no live process
// is found in the requested network namespace.
var ErrNoProcess = errors.New("no live process in the network namespace")

// Netns is a handle on a network namespace reached through a live process in
// it, or through its mount. It holds an open file descriptor on the namespace, which keeps the
// namespace alive: Close it promptly.
type Netns struct {
	ns    *netns.NS
	pid   int
	inode uint64
}

// OpenNetns returns a handle on the netns with this inode. It tries the hint
// pids first (e.g. the failing process, its parent, a pid that was seen in
// that netns earlier), then scans /proc/*/ns/net for any live process in it
// (a pod's sandbox "pause" process keeps a pod's netns alive). It opens
// /proc/PID/ns/net and verifies (fstat) that the inode is the one asked for,
// so a reused pid cannot hand out the wrong netns. A netns with no process
// in it is entered through its mount (NetNSMounts), when it has one. The
// error wraps ErrNoProcess if it has neither.
//
// The caller Closes it promptly: an open handle keeps the namespace alive.
func OpenNetns(inode uint64, hintPIDs ...int) (*Netns, error) {
	if inode == 0 {
		return nil, errors.New("netdiag: OpenNetns: inode 0")
	}
	tried := make(map[int]bool, len(hintPIDs))
	var firstErr error // first failure other than "process gone"
	try := func(pid int) *Netns {
		tried[pid] = true
		ns, err := netns.Open(procPath(pid, "ns/net"))
		if err != nil {
			if firstErr == nil && !gone(err) {
				firstErr = err
			}
			return nil
		}
		if ns.Inode() != inode {
			ns.Close()
			return nil
		}
		return &Netns{ns: ns, pid: pid, inode: inode}
	}
	for _, pid := range hintPIDs {
		if pid <= 0 || tried[pid] {
			continue
		}
		if n := try(pid); n != nil {
			return n, nil
		}
	}

	want := nsLink(inode)
	pids, err := listPIDs()
	if err != nil {
		return nil, fmt.Errorf("netdiag: OpenNetns %s: %w", want, err)
	}
	for _, pid := range pids {
		if tried[pid] {
			continue
		}
		// Cheap filter first; the fstat after opening is what counts.
		if link, err := os.Readlink(procPath(pid, "ns/net")); err != nil || link != want {
			if err != nil && firstErr == nil && !gone(err) {
				firstErr = err
			}
			continue
		}
		if n := try(pid); n != nil {
			return n, nil
		}
	}
	if n := openMounted(inode); n != nil {
		return n, nil // no process in it, but a mount (ip netns add): PID is 0
	}
	if firstErr != nil {
		return nil, fmt.Errorf("netdiag: OpenNetns %s: %w (some processes could not be inspected: %v)", want, ErrNoProcess, firstErr)
	}
	return nil, fmt.Errorf("netdiag: OpenNetns %s: %w", want, ErrNoProcess)
}

// Inode returns the inode of the network namespace, as in net:[INODE].
func (n *Netns) Inode() uint64 { return n.inode }

// PID returns the process through which the handle was opened, 0 when it
// was opened through a mount. The process may have exited since; the
// handle stays valid until Close.
func (n *Netns) PID() int { return n.pid }

// Close closes the namespace file descriptor. It is idempotent.
func (n *Netns) Close() error { return n.ns.Close() }

// HostInode returns the node's network namespace: pid 1's when eaddr sees
// the host's processes (hostPID). Some sandboxes make pid 1 uninspectable
// even for root (this CI machine's does); then a kernel thread's, pid 2
// (kthreadd), which is always in the initial namespace. Never eaddr's own:
// in a pod without the host's network it is the pod's, and a NodePort
// check or host-network advice for it would be wrong without a word.
func HostInode() (uint64, error) { return hostInode("/proc") }

func hostInode(proc string) (uint64, error) {
	ino, err1 := nsInode(proc + "/1/ns/net")
	if err1 == nil {
		return ino, nil
	}
	if !kernelThread(proc + "/2/stat") {
		return 0, fmt.Errorf("netdiag: the host network namespace is not known: %v, and pid 2 is no kernel thread (eaddr needs the host's PID namespace: hostPID)", err1)
	}
	ino, err2 := nsInode(proc + "/2/ns/net")
	if err2 != nil {
		return 0, fmt.Errorf("netdiag: the host network namespace is not known: %v; %v", err1, err2)
	}
	return ino, nil
}

// nsInode is the namespace inode a /proc/PID/ns link names ("net:[4026531833]").
func nsInode(link string) (uint64, error) {
	target, err := os.Readlink(link)
	if err != nil {
		return 0, err
	}
	inner, ok := strings.CutPrefix(target, "net:[")
	if !ok || !strings.HasSuffix(inner, "]") {
		return 0, fmt.Errorf("%s: %q is no network namespace", link, target)
	}
	return strconv.ParseUint(strings.TrimSuffix(inner, "]"), 10, 64)
}

// kernelThread: the process of a /proc/PID/stat has PF_KTHREAD in its flags
// (the ninth field, after the comm in parentheses).
func kernelThread(stat string) bool {
	b, err := os.ReadFile(stat)
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	const pfKthread = 0x00200000
	return err == nil && flags&pfKthread != 0
}

// nsLink is what readlink /proc/PID/ns/net shows for the namespace inode.
func nsLink(inode uint64) string {
	return "net:[" + strconv.FormatUint(inode, 10) + "]"
}

// procPath returns /proc/PID/rel.
func procPath(pid int, rel string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + rel
}

// gone reports whether err means the process (or its fd) no longer exists.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// listPIDs returns the numeric entries of /proc (thread-group ids).
func listPIDs() ([]int, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Do runs fn on a thread inside the netns (the caller's threads never
// move): for readers of other packages, such as the node's NodePort rules.
func (n *Netns) Do(fn func() error) error { return n.ns.Do(fn) }
