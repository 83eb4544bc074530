package netdiag

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// UnixSocket is one unix-domain socket of the netns.
type UnixSocket struct {
	Type  uint8  // unix.SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET
	State uint8  // LISTEN (10), ESTABLISHED (1, connected) or CLOSE (7, neither)
	Inode uint64 // the socket's inode, as in /proc/PID/fd "socket:[INODE]"
	// Name is the bound name: a path as given to bind() (it may be
	// relative), or "@" and the abstract name; "" when unbound.
	Name string
	// VFSIno and VFSDev identify the socket file of a path socket (stat(2)
	// st_ino and st_dev); 0 when unknown (abstract, unbound, /proc fallback).
	VFSIno uint64
	VFSDev uint64
}

// Layout of the unix_diag structures (include/uapi/linux/unix_diag.h).
const (
	sizeofUnixDiagReq = 24 // family, protocol, pad(2), states, ino, show, cookie[2]
	sizeofUnixDiagMsg = 16 // family, type, state, pad, ino, cookie[2]

	udiagShowName = 0x1
	udiagShowVFS  = 0x2

	unixDiagName = 0
	unixDiagVFS  = 1
)

// DumpUnix lists the unix-domain sockets of the netns that are bound to a
// name (unbound ones, e.g. the accepted ends of a listener, are left out):
// one sock_diag dump (AF_UNIX, UDIAG_SHOW_NAME|UDIAG_SHOW_VFS). Abstract
// names live in the netns; socket files can be reached from any netns, so
// a file's socket may live in another netns and then is not in this list.
//
// When the kernel cannot dump unix sockets (unix_diag not loaded), the
// netns's /proc/net/unix is read instead, logged once: names as bound, no
// file inode; byName says so.
func (n *Netns) DumpUnix() (socks []UnixSocket, byName bool, err error) {
	err = n.ns.Do(func() error {
		d, err := openSockDiag()
		if err != nil && !noHandler(err) {
			return err
		}
		if d != nil {
			defer d.close()
		}
		if useNetlink(d, kindUnix) {
			socks, err = d.dumpUnixNetlink()
			if err == nil || !noHandler(err) {
				return err
			}
			cannotDump(kindUnix, "unix", err)
		} else if TestingNoSockDiag.Load() {
			cannotDump(kindUnix, "unix", unix.ENOENT)
		}
		byName = true
		f, err := os.Open("/proc/thread-self/net/unix")
		if err != nil {
			return fmt.Errorf("sock_diag cannot dump unix sockets and %w", err)
		}
		defer f.Close()
		all, err := ParseProcNetUnix(f, nil)
		for _, s := range all {
			if s.Name != "" {
				socks = append(socks, s)
			}
		}
		return err
	})
	if err != nil {
		return nil, byName, fmt.Errorf("netdiag: DumpUnix in %s: %w", nsLink(n.inode), err)
	}
	return socks, byName, nil
}

func (d *sockDiag) dumpUnixNetlink() ([]UnixSocket, error) {
	var req [unix.SizeofNlMsghdr + sizeofUnixDiagReq]byte
	r := req[unix.SizeofNlMsghdr:]
	r[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(r[4:], allStates)
	binary.NativeEndian.PutUint32(r[12:], udiagShowName|udiagShowVFS)
	var socks []UnixSocket
	err := d.dump(req[:], func(p []byte) {
		if s, ok := parseUnixDiagMsg(p); ok && s.Name != "" {
			socks = append(socks, s)
		}
	})
	if err != nil {
		return nil, err
	}
	return socks, nil
}

// parseUnixDiagMsg decodes a struct unix_diag_msg and its UNIX_DIAG_NAME
// and UNIX_DIAG_VFS attributes.
func parseUnixDiagMsg(p []byte) (UnixSocket, bool) {
	if len(p) < sizeofUnixDiagMsg || p[0] != unix.AF_UNIX {
		return UnixSocket{}, false
	}
	ne := binary.NativeEndian
	s := UnixSocket{Type: p[1], State: p[2], Inode: uint64(ne.Uint32(p[4:]))}
	for a := p[sizeofUnixDiagMsg:]; len(a) >= 4; {
		alen, typ := int(ne.Uint16(a)), ne.Uint16(a[2:])
		if alen < 4 || alen > len(a) {
			break
		}
		v := a[4:alen]
		switch typ {
		case unixDiagName:
			s.Name = unixName(v)
		case unixDiagVFS:
			if len(v) >= 8 {
				s.VFSIno = uint64(ne.Uint32(v))
				kdev := ne.Uint32(v[4:]) // the kernel's dev_t: MAJOR<<20 | MINOR
				s.VFSDev = unix.Mkdev(kdev>>20, kdev&(1<<20-1))
			}
		}
		a = a[min(nlmAlign(alen), len(a)):]
	}
	return s, true
}

// unixName renders a sun_path as the kernel stored it: a path up to its
// NUL, or "@" and the abstract name (its bytes kept as they are).
func unixName(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if v[0] == 0 {
		return "@" + string(v[1:])
	}
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// EachNetns calls fn with a handle on every network namespace that a live
// process is in, except skip, until fn returns true or the deadline (zero:
// none) passes; the handle is closed when fn returns. It reports how many
// namespaces fn saw and how many there were. A socket file can be bound
// from any netns; this finds the one whose sockets hold it.
func EachNetns(skip uint64, deadline time.Time, fn func(*Netns) bool) (seen, total int, err error) {
	pids, err := listPIDs()
	if err != nil {
		return 0, 0, fmt.Errorf("netdiag: EachNetns: %w", err)
	}
	byInode := map[string]int{nsLink(skip): 0}
	var order []string
	for _, pid := range pids {
		link, err := os.Readlink(procPath(pid, "ns/net"))
		if err != nil {
			continue
		}
		if _, ok := byInode[link]; !ok {
			byInode[link] = pid
			order = append(order, link)
		}
	}
	for _, link := range order {
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]"), 10, 64)
		if err != nil {
			continue
		}
		n, err := OpenNetns(inode, byInode[link])
		if err != nil {
			continue // the process exited meanwhile; its netns may be gone with it
		}
		seen++
		stop := fn(n)
		n.Close()
		if stop {
			break
		}
	}
	return seen, len(order), nil
}
