// Package decode turns the kernel's raw event into a typed Event: errno
// names, addresses, the socket tuple, and the boot clock as wall time.
package decode

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/tracer"
)

// Schema is the version of the JSON event. A change that renames or retypes
// a field bumps it and says so in docs/events.md.
const Schema = 1

// Syscall is the failing system call.
type Syscall uint8

const (
	Connect Syscall = Syscall(tracer.SysConnect)
	Bind    Syscall = Syscall(tracer.SysBind)
)

// AppendTo appends the name without allocating, also for unknown ones.
func (s Syscall) AppendTo(b []byte) []byte {
	switch s {
	case Connect, Bind:
		return append(b, s.String()...)
	}
	return strconv.AppendUint(append(b, "unknown:"...), uint64(s), 10)
}

func (s Syscall) String() string {
	switch s {
	case Connect:
		return "connect"
	case Bind:
		return "bind"
	}
	return "unknown:" + itoa(int(s))
}

// Address families (linux/socket.h).
const (
	AFUnix  = unix.AF_UNIX
	AFInet  = unix.AF_INET
	AFInet6 = unix.AF_INET6
)

// Addr is one end of the socket tuple: an IP and port, a unix socket path,
// or, for any other family, the family and the raw bytes that were passed.
type Addr struct {
	Valid bool
	// Unreadable: the caller passed Addrlen bytes at an address eaddr could
	// not read (NULL, unmapped); nothing else is known.
	Unreadable bool
	Addrlen    int
	Family     uint16
	IP         netip.AddrPort // inet and inet6; v4-mapped v6 is shown as v4
	Path       []byte         // unix: the path; abstract names start with '@'
	Raw        []byte         // other families: sockaddr bytes after the family
	inBuf      bool           // Path and Raw are in the Event's sockaddr buffer, after the family
}

// Event is one failed connect() or bind(), decoded. Byte slices point into
// the Event's own buffers, so an Event is reused without allocating. An
// Event that must outlive the next Decode into the same one (a queue) is
// copied with CopyTo, never by assignment: a copy's slices would still
// point into the original.
type Event struct {
	Time    time.Time
	BootNs  uint64
	Syscall Syscall
	// NodePort marks a connect() that did not fail but got a source port in
	// the NodePort range (trace --nodeport-collisions); Errno is 0 then.
	NodePort bool
	Errno    int
	PID      uint32
	TID      uint32
	PPID     uint32
	UID      uint32
	Comm     []byte
	// Exe identifies the executable even after the process exited: its file
	// name, inode and device (as stat(2) reports st_dev), and Args the first
	// bytes of argv, NUL-separated (a busybox applet, an interpreter's script).
	ExeName []byte
	ExeIno  uint64
	ExeDev  uint64
	Args    []byte
	// ExeUnresolved says why Exe and Args are empty when the kernel had
	// sent them with an earlier event of the process that eaddr no longer
	// keeps (tracer.FlagProcSent); "" otherwise.
	ExeUnresolved string
	FD            int32
	Addrlen       int // the addrlen argument
	NetNS         uint32
	MntNS         uint32
	CgroupID      uint64
	// CgroupPath is relative to the cgroup2 root, "" when unknown, and then
	// CgroupUnresolved says why.
	CgroupPath       string
	CgroupUnresolved string
	// NetNSCookie identifies the netns for certain (inodes are reused); 0
	// when the kernel has none. StartBoottime is the process's start, ns
	// since boot: with PID, which process for certain.
	NetNSCookie   uint64
	StartBoottime uint64
	// Pod is the Kubernetes pod and container (PodMapper), nil when none.
	// PodVia is "netns" when the process is outside the pod's cgroups and
	// was attributed by its network namespace. PodUnresolved says why eaddr
	// cannot tell whether or which pod; PodNamesUnresolved why the pod has a
	// UID and container ID but no names.
	Pod                *Pod
	PodVia             string
	PodUnresolved      string
	PodNamesUnresolved string
	// HostNetwork: the event was in the node's own network namespace.
	HostNetwork bool
	// Suppressed counts the identical failures (same netns, syscall, errno
	// and address) that the rate limit held back before this one.
	Suppressed uint64
	// LimitID is the rate limit's key for this failure in the kernel, valid
	// when Limited (the limit is on).
	Limited bool
	LimitID uint64
	// Async: a non-blocking connect() (EINPROGRESS) whose socket failed
	// later with Errno, AsyncAfter after the call; the rest is as at the
	// call.
	Async      bool
	AsyncAfter time.Duration
	// Interrupted: a blocking connect() that a signal interrupted, whose
	// socket failed later with Errno, AsyncAfter after the call (the
	// program got it from the restarted call, or by waiting on the socket).
	Interrupted bool
	// Attempt numbers the failures of one logical attempt of a thread
	// (explain.Attempts): 1 for the first, 2 and up for its retries.
	Attempt int

	// Socket fields come from the fd's socket; HasSocket is false when the
	// fd was not a socket or could not be read.
	HasSocket bool
	Family    uint16
	Type      uint16
	Protocol  uint16

	// Local is the bound address of the socket for connect, the requested
	// address for bind. Remote is the connect() destination.
	Local  Addr
	Remote Addr
	// LocalReleased: Local is the source address and port the failed
	// connect() had, which the kernel released when it failed (the socket
	// holds none now); recorded when the connect ended, as the socket no
	// longer says it (tracer.FlagReleased).
	LocalReleased bool
	// SocketCookie is the socket's cookie (SO_COOKIE, `ss -e` sk:HEX): the
	// same for every event of one socket, such as a nodeport_collision and
	// the failure of that connect. 0 when unknown.
	SocketCookie uint64

	// Sized as the kernel's event (bpf/eaddr.h) sizes them.
	comm [len(tracer.RawEvent{}.Comm)]byte
	exe  [len(tracer.RawEvent{}.ExeName)]byte
	args [len(tracer.RawEvent{}.Args)]byte
	addr [len(tracer.RawEvent{}.Addr)]byte
}

// Pod is what eaddr reports of a pod and container (package pod fills it).
type Pod struct {
	UID         string
	Name        string
	Namespace   string
	Container   string // empty for the pod's sandbox (pause) process
	ContainerID string
	Image       string
	QoS         string
	Runtime     string            // containerd, cri-o or docker, from the cgroup path; "" when it does not say
	Labels      map[string]string // the pod's labels, without the runtime's io.kubernetes.* ones
	NetNS       uint64            // inode of the pod's network namespace, when known
	NetNSCookie uint64            // its cookie (never reused), when known
}

// Kind is "failure", or "nodeport_collision" for a NodePort event.
func (e *Event) Kind() string {
	if e.NodePort {
		return "nodeport_collision"
	}
	return "failure"
}

// ExeForgotten is Event.ExeUnresolved when the program's identity was sent
// once, with an earlier event of the process, and is no longer kept.
const ExeForgotten = "the kernel sends a process's executable and argv once, with its first event; eaddr no longer keeps them (more than 8,192 processes failed since)"

// Decoder turns raw events into Events. It is not safe for concurrent use.
type Decoder struct {
	Clock   *BootClock
	Cgroups CgroupNamer // nil: no cgroup paths, and NoCgroups says why
	// NoCgroups is why there is no resolver, given as each event's
	// CgroupUnresolved.
	NoCgroups string
}

// CgroupNamer names cgroup ids (package pod's CgroupResolver): the path, or
// "" and why it is not known.
type CgroupNamer interface {
	Path(id uint64) (path, why string)
}

// NewDecoder returns a Decoder with a fresh boot clock; cgroups may be nil.
func NewDecoder(cgroups CgroupNamer) *Decoder {
	return &Decoder{Clock: NewBootClock(), Cgroups: cgroups}
}

// Decode fills ev from raw. It does not allocate.
func (d *Decoder) Decode(raw *tracer.RawEvent, ev *Event) {
	ev.BootNs = raw.BootNs
	if d.Clock != nil {
		ev.Time = d.Clock.Wall(raw.BootNs)
	} else {
		ev.Time = time.Time{}
	}
	ev.Syscall = Syscall(raw.Syscall)
	ev.NodePort = raw.Flags&tracer.FlagNodePort != 0
	ev.Async = raw.Flags&tracer.FlagAsync != 0
	ev.Interrupted = raw.Flags&tracer.FlagInterrupted != 0
	ev.AsyncAfter = time.Duration(raw.AsyncNs)
	ev.Errno = int(raw.Err)
	ev.PID, ev.TID, ev.PPID, ev.UID = raw.Tgid, raw.Tid, raw.Ppid, raw.Uid
	ev.Comm = cstring(ev.comm[:], raw.Comm[:])
	ev.ExeName = cstring(ev.exe[:], raw.ExeName[:])
	n := min(int(raw.ArgsLen), len(raw.Args))
	for i := range n {
		ev.args[i] = byte(raw.Args[i])
	}
	ev.Args = ev.args[:n]
	ev.ExeIno = raw.ExeIno
	ev.ExeDev = 0
	ev.ExeUnresolved = ""
	if raw.Flags&tracer.FlagProcSent != 0 {
		ev.ExeUnresolved = ExeForgotten
	}
	if raw.ExeIno != 0 {
		// The kernel's dev_t is MAJOR<<20|MINOR; stat(2) encodes it differently.
		ev.ExeDev = unix.Mkdev(raw.ExeDev>>20, raw.ExeDev&(1<<20-1))
	}
	ev.FD = raw.Fd
	ev.Suppressed = 0
	ev.Limited, ev.LimitID = raw.Flags&tracer.FlagLimited != 0, raw.LimitId
	ev.Addrlen = int(raw.Addrlen)
	ev.NetNS, ev.MntNS = raw.Netns, raw.Mntns
	ev.CgroupID = raw.CgroupId
	ev.NetNSCookie, ev.StartBoottime = raw.NetnsCookie, raw.StartBoottime
	ev.CgroupPath, ev.CgroupUnresolved = "", d.NoCgroups
	if d.Cgroups != nil {
		ev.CgroupPath, ev.CgroupUnresolved = d.Cgroups.Path(raw.CgroupId)
	}

	ev.HasSocket = raw.Flags&tracer.FlagSocket != 0
	ev.SocketCookie = raw.SockCookie
	ev.LocalReleased = false
	ev.Family, ev.Type, ev.Protocol = 0, 0, 0
	if ev.HasSocket {
		ev.Family, ev.Type, ev.Protocol = raw.SockFamily, raw.SockType, raw.SockProtocol
	}

	var user Addr
	switch {
	case raw.Flags&tracer.FlagAddr != 0:
		n := min(int(raw.AddrCopied), len(raw.Addr))
		copy(ev.addr[:n], raw.Addr[:n])
		user = parseSockaddr(ev.addr[:n])
	case raw.Addrlen > 0:
		user = Addr{Valid: true, Unreadable: true, Addrlen: int(raw.Addrlen)}
	}
	switch ev.Syscall {
	case Bind:
		ev.Local, ev.Remote = user, Addr{}
	default:
		ev.Remote = user
		ev.Local = socketLocal(raw)
		ev.LocalReleased = ev.Local.Valid && raw.Flags&tracer.FlagReleased != 0
	}
}

// CopyTo makes dst a copy of e whose slices point into dst's own buffers.
// It does not allocate (but for a Path or Raw set by hand, which gets a
// copy of its own). The Pod is shared: a Pod is never changed once an
// Event points to it (package pod makes a new one instead).
func (e *Event) CopyTo(dst *Event) {
	if dst == e {
		return
	}
	*dst = *e // the buffers by value, the slices still e's
	dst.Comm = dst.comm[:len(e.Comm)]
	dst.ExeName = dst.exe[:len(e.ExeName)]
	dst.Args = dst.args[:len(e.Args)]
	dst.Local.rebase(&e.Local, dst.addr[:])
	dst.Remote.rebase(&e.Remote, dst.addr[:])
}

// rebase points a's Path or Raw, copied from src, into buf, where
// parseSockaddr put them (after the family); one set by hand gets a copy.
func (a *Addr) rebase(src *Addr, buf []byte) {
	switch {
	case src.inBuf && src.Path != nil:
		a.Path = buf[2 : 2+len(src.Path)]
	case src.Path != nil:
		a.Path = append([]byte(nil), src.Path...)
	}
	switch {
	case src.inBuf && src.Raw != nil:
		a.Raw = buf[2 : 2+len(src.Raw)]
	case src.Raw != nil:
		a.Raw = append([]byte(nil), src.Raw...)
	}
}

// socketLocal is the address the socket was bound to before the call
// (0.0.0.0:0 or [::]:0 when it was not).
func socketLocal(raw *tracer.RawEvent) Addr {
	if raw.Flags&tracer.FlagSocket == 0 {
		return Addr{}
	}
	switch raw.SockFamily {
	case AFInet:
		ip := netip.AddrFrom4([4]byte(raw.LocalAddr[:4]))
		return Addr{Valid: true, Family: AFInet, IP: netip.AddrPortFrom(ip, raw.LocalPort)}
	case AFInet6:
		ip := netip.AddrFrom16(raw.LocalAddr).Unmap()
		return Addr{Valid: true, Family: AFInet6, IP: netip.AddrPortFrom(ip, raw.LocalPort)}
	}
	return Addr{}
}

// parseSockaddr reads a struct sockaddr as user space passed it. Family is
// host-endian (both supported arches are little-endian), ports big-endian.
func parseSockaddr(b []byte) Addr {
	if len(b) < 2 {
		return Addr{}
	}
	a := Addr{Valid: true, Family: binary.LittleEndian.Uint16(b), inBuf: true}
	switch a.Family {
	case AFInet:
		if len(b) >= 8 {
			ip := netip.AddrFrom4([4]byte(b[4:8]))
			a.IP = netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4]))
			return a
		}
	case AFInet6:
		if len(b) >= 24 {
			ip := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
			a.IP = netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4]))
			return a
		}
	case AFUnix:
		p := b[2:]
		if len(p) > 0 && p[0] == 0 { // abstract: "@name", NULs kept as given by length
			p[0] = '@'
		} else {
			for i, c := range p {
				if c == 0 {
					p = p[:i]
					break
				}
			}
		}
		a.Path = p
		return a
	}
	a.Raw = b[2:]
	return a
}

// cstring copies the NUL-terminated src into dst and returns the used part.
func cstring(dst []byte, src []int8) []byte {
	n := 0
	for n < len(src) && n < len(dst) && src[n] != 0 {
		dst[n] = byte(src[n])
		n++
	}
	return dst[:n]
}

func itoa(n int) string {
	var b [20]byte
	return string(strconv.AppendInt(b[:0], int64(n), 10))
}
