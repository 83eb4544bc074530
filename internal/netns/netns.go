// Package netns enters Linux network namespaces and makes throwaway ones
// held by a file descriptor. In production it is how the diagnosis reads a
// failure's netns (diagnose/netdiag: Open, Do, Sysctl) and how the pod
// resolver reads a sandbox's netns cookie (Cookie); `eaddr demo` and the
// integration tests also use it to reproduce ephemeral-port exhaustion
// without touching the host's network or sysctls.
//
// Nothing here shells out (no iproute2, nsenter or sysctl binaries needed) and
// nothing is bind-mounted under /run/netns: a namespace lives as long as its
// NS is open or a process (or thread) is still inside it.
//
// Network namespaces are per OS thread on Linux. Every operation that must run
// "inside" a namespace is therefore executed on a fresh goroutine locked to its
// OS thread (see NS.Do), so the caller's thread is never switched. If switching
// a thread back to its original namespace ever fails, the thread is left locked
// and the Go runtime terminates it when the goroutine exits, instead of reusing
// a thread that sits in the wrong namespace.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/pdeath"
)

// threadNetNS is the current thread's network namespace. /proc/self/ns/net
// would be the namespace of the thread-group leader, not of the calling thread.
const threadNetNS = "/proc/thread-self/ns/net"

// dialTimeout bounds NS.Dial.
const dialTimeout = 2 * time.Second

// ErrClosed is returned by operations on a closed NS.
var ErrClosed = errors.New("netns: namespace closed")

// NS is a network namespace held open by a file descriptor referring to
// /proc/thread-self/ns/net of a thread that was inside it.
type NS struct {
	mu    sync.RWMutex // guards fd against Close during setns
	fd    int          // O_RDONLY|O_CLOEXEC fd of the namespace; -1 once closed
	inode uint64       // inode of the nsfs file, as in net:[INODE]
}

// New creates a new network namespace and brings its loopback interface up,
// so that 127.0.0.1 and ::1 work inside it.
//
// It locks a fresh goroutine to its OS thread, calls unshare(CLONE_NEWNET),
// opens /proc/thread-self/ns/net, sets "lo" IFF_UP via SIOCGIFFLAGS /
// SIOCSIFFLAGS, and setns()es the thread back to its original namespace (if
// that fails, the thread stays locked so Go discards it).
//
// No bind mount is made under /run/netns: the namespace lives as long as the
// returned NS is open or some process is inside it. It needs CAP_SYS_ADMIN.
func New() (*NS, error) {
	type result struct {
		ns  *NS
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var res result
		defer func() { ch <- res }() // also runs on panic/Goexit, never blocks
		res.ns, res.err = newOnLockedThread()
	}()
	r := <-ch
	if r.ns == nil && r.err == nil {
		r.err = errors.New("netns: New: creating goroutine exited unexpectedly")
	}
	return r.ns, r.err
}

// newOnLockedThread does the work of New. It must run on its own goroutine:
// it locks the OS thread and unlocks it only if the thread is back in its
// original namespace.
func newOnLockedThread() (ns *NS, err error) {
	runtime.LockOSThread()

	orig, err := openNS()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns: New: open current netns: %w", err)
	}
	defer unix.Close(orig)

	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		// unshare failed: the thread is unchanged.
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("netns: New: unshare(CLONE_NEWNET): %w", err)
	}

	// From here on the thread is in the new namespace; always try to go back.
	defer func() {
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			// Leave the thread locked: Go terminates it when this goroutine
			// exits, so no goroutine ever runs in the wrong namespace.
			if ns != nil {
				ns.Close()
				ns = nil
			}
			err = errors.Join(err, fmt.Errorf("netns: New: setns back to original netns: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
	}()

	fd, err := openNS()
	if err != nil {
		return nil, fmt.Errorf("netns: New: open new netns: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netns: New: fstat netns fd: %w", err)
	}
	ns = &NS{fd: fd, inode: st.Ino}
	if err := loopbackUp(); err != nil {
		ns.Close()
		return nil, fmt.Errorf("netns: New: bring lo up: %w", err)
	}
	return ns, nil
}

// Open returns an NS for the existing network namespace file at path, e.g.
// /proc/PID/ns/net or /proc/PID/task/TID/ns/net (or a bind mount such as
// /run/netns/NAME). The file is opened O_RDONLY|O_CLOEXEC and checked with
// the NS_GET_NSTYPE ioctl to be a network namespace; Inode is its fstat inode.
// Do, SetSysctl, Sysctl, Start, Listen and Dial then work inside it, as for an
// NS from New. Close closes only the file descriptor: the namespace itself is
// left alone and lives on while processes are in it. Entering it with Do
// needs CAP_SYS_ADMIN.
func Open(path string) (*NS, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netns: open %s: %w", path, err)
	}
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netns: open %s: not a namespace file (NS_GET_NSTYPE): %w", path, err)
	}
	if typ != unix.CLONE_NEWNET {
		unix.Close(fd)
		return nil, fmt.Errorf("netns: open %s: namespace type %#x is not a network namespace", path, typ)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netns: open %s: fstat: %w", path, err)
	}
	return &NS{fd: fd, inode: st.Ino}, nil
}

// openNS opens the calling thread's network namespace.
func openNS() (int, error) {
	return unix.Open(threadNetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// loopbackUp sets IFF_UP on "lo" in the calling thread's network namespace.
// The socket is only a handle for the ioctl; it is created in (and so refers
// to) the calling thread's namespace.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo up: %w", err)
	}
	return nil
}

// Inode returns the inode number of the namespace, as shown by
// `readlink /proc/PID/ns/net` -> net:[INODE]. It stays valid after Close.
func (n *NS) Inode() uint64 { return n.inode }

// Path names the namespace for another process while n is open:
// /proc/<this pid>/fd/<fd>, which setns(2) and ip netns accept.
func (n *NS) Path() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.fd)
}

// String returns "net:[INODE]", the form readlink shows for /proc/PID/ns/net.
func (n *NS) String() string { return "net:[" + strconv.FormatUint(n.inode, 10) + "]" }

// Close closes the namespace file descriptor. The namespace itself goes away
// once no process, thread or socket-holding reference keeps it alive. Close is
// idempotent: calls after the first return nil.
func (n *NS) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd < 0 {
		return nil
	}
	err := unix.Close(n.fd)
	n.fd = -1
	if err != nil {
		return fmt.Errorf("netns: close: %w", err)
	}
	return nil
}

// enter switches the calling (locked) thread into n.
func (n *NS) enter() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.fd < 0 {
		return ErrClosed
	}
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("netns: setns into %s: %w", n, err)
	}
	return nil
}

// Do runs fn on a fresh goroutine locked to an OS thread that has been
// switched into n with setns, then switches that thread back. The caller's
// own thread is never touched. If restoring the original namespace fails, the
// error is returned (joined with fn's) and the thread stays locked, so the Go
// runtime discards it when the goroutine ends.
//
// Only work done on that thread happens inside n: sockets created there
// belong to n for their whole life, but goroutines started by fn run on other
// threads, in the host's namespace. A panic in fn is re-raised in the caller.
func (n *NS) Do(fn func() error) error {
	type result struct {
		err      error
		panicked bool
		pval     any
	}
	ch := make(chan result, 1)
	go func() {
		res := result{err: errors.New("netns: Do: fn called runtime.Goexit")}
		defer func() { ch <- res }() // runs last, also on Goexit

		runtime.LockOSThread()
		orig, err := openNS()
		if err != nil {
			runtime.UnlockOSThread()
			res.err = fmt.Errorf("netns: Do: open current netns: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := n.enter(); err != nil {
			// setns failed, the thread did not move.
			runtime.UnlockOSThread()
			res.err = err
			return
		}
		defer func() {
			if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
				// Keep the thread locked: it is terminated when we return.
				res.err = errors.Join(res.err, fmt.Errorf("netns: Do: setns back to original netns: %w", rerr))
				return
			}
			runtime.UnlockOSThread()
		}()
		defer func() {
			if p := recover(); p != nil {
				res = result{panicked: true, pval: p}
			}
		}()
		res.err = fn()
	}()
	r := <-ch
	if r.panicked {
		panic(r.pval)
	}
	return r.err
}

// sysctlPath maps a sysctl name to its path under /proc/sys. Both
// "net.ipv4.ip_local_port_range" and "net/ipv4/ip_local_port_range" are
// accepted (as with sysctl(8), a name containing '/' is used as is, so dots in
// interface names can be written). Only net.* names are accepted: other
// sysctls are not per network namespace, so writing them "inside" n would
// change the host.
func sysctlPath(name string) (string, error) {
	p := name
	if !strings.Contains(p, "/") {
		p = strings.ReplaceAll(p, ".", "/")
	}
	p = strings.TrimPrefix(p, "/")
	clean := path.Clean(p)
	if name == "" || clean != p || clean == "." || strings.HasPrefix(clean, "..") {
		return "", fmt.Errorf("netns: invalid sysctl name %q", name)
	}
	if !strings.HasPrefix(clean, "net/") {
		return "", fmt.Errorf("netns: sysctl %q is not a per-netns net.* sysctl", name)
	}
	return "/proc/sys/" + clean, nil
}

// SetSysctl writes value to the network sysctl name inside n. name is like
// "net.ipv4.ip_local_port_range" or "net/ipv4/ip_local_port_range"; only
// net.* sysctls are allowed. The file /proc/sys/<path> is opened from a thread
// inside n: net sysctls are per namespace and resolved at open time, so the
// host's values are not affected.
func (n *NS) SetSysctl(name, value string) error {
	p, err := sysctlPath(name)
	if err != nil {
		return err
	}
	return n.Do(func() error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("netns: set sysctl %s in %s: %w", name, n, err)
		}
		// One write at offset 0: how the proc sysctl handlers want it.
		_, werr := f.Write([]byte(value))
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("netns: set sysctl %s=%q in %s: %w", name, value, n, err)
		}
		return nil
	})
}

// Sysctl reads the network sysctl name inside n (see SetSysctl for the name
// format) and returns its value with surrounding white space trimmed. Multiple
// fields are returned as the kernel prints them (e.g. "40000\t40001").
func (n *NS) Sysctl(name string) (string, error) {
	p, err := sysctlPath(name)
	if err != nil {
		return "", err
	}
	var out string
	err = n.Do(func() error {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("netns: read sysctl %s in %s: %w", name, n, err)
		}
		out = strings.TrimSpace(string(b))
		return nil
	})
	return out, err
}

// Start calls cmd.Start() from a thread inside n. On Linux Go forks the child
// from the calling thread (clone(CLONE_VM|CLONE_VFORK)), so the child inherits
// that thread's network namespace; there is no intermediate process, and
// cmd.Process.Pid is the pid of the process running in n. The caller waits
// for the command as usual (cmd.Wait); I/O copying goroutines run outside n,
// which does not matter since they only move bytes through pipes.
//
// A cmd with a parent-death signal (SysProcAttr.Pdeathsig) is started by
// pdeath.Start instead, from a thread kept (back outside n) until the child
// exits: the kernel sends that signal when the forking thread exits, and a
// thread Do gave back could be retired by the runtime at any moment, killing
// the child.
func (n *NS) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Pdeathsig != 0 {
		return pdeath.Start(cmd, n.enterForFork)
	}
	return n.Do(cmd.Start)
}

// enterForFork moves the calling thread, locked, into n for pdeath.Start,
// and returns how to move it back.
func (n *NS) enterForFork() (leave func() error, err error) {
	orig, err := openNS()
	if err != nil {
		return nil, fmt.Errorf("netns: Start: open current netns: %w", err)
	}
	if err := n.enter(); err != nil {
		unix.Close(orig)
		return nil, err
	}
	return func() error {
		defer unix.Close(orig)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netns: Start: setns back to original netns: %w", err)
		}
		return nil
	}, nil
}

// Cookie is the namespace's cookie (SO_NETNS_COOKIE, Linux 5.14+): unlike
// the inode, it is never reused, so it tells a namespace from a later one
// that got the freed inode. Entering n needs CAP_SYS_ADMIN.
func (n *NS) Cookie() (uint64, error) {
	var cookie uint64
	err := n.Do(func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("netns: cookie: socket: %w", err)
		}
		defer unix.Close(fd)
		v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		if err != nil {
			return fmt.Errorf("netns: cookie: SO_NETNS_COOKIE: %w", err)
		}
		cookie = v
		return nil
	})
	return cookie, err
}
