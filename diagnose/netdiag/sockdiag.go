package netdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// Socket is one inet socket as sock_diag reports it.
type Socket struct {
	Family uint8          // unix.AF_INET or unix.AF_INET6
	Proto  uint8          // unix.IPPROTO_TCP or unix.IPPROTO_UDP
	State  uint8          // TCP state number (1 ESTABLISHED, 2 SYN_SENT, ... 6 TIME_WAIT, 10 LISTEN, ...); UDP: 7 (CLOSE) or 1 (connected)
	Local  netip.AddrPort // v4-mapped v6 addresses shown unmapped (Unmap)
	Remote netip.AddrPort
	Inode  uint64 // 0 for TIME_WAIT (no socket inode)
	UID    uint32
}

// TCP states as numbered by the kernel (include/net/tcp_states.h), for
// this package and the diagnosis.
const (
	StateEstablished = 1
	StateSynSent     = 2
	StateSynRecv     = 3
	StateFinWait1    = 4
	StateFinWait2    = 5
	StateTimeWait    = 6
	StateClose       = 7
	StateCloseWait   = 8
	StateLastAck     = 9
	StateListen      = 10
	StateClosing     = 11
	StateNewSynRecv  = 12
)

var stateNames = [...]string{
	StateEstablished: "ESTABLISHED",
	StateSynSent:     "SYN_SENT",
	StateSynRecv:     "SYN_RECV",
	StateFinWait1:    "FIN_WAIT1",
	StateFinWait2:    "FIN_WAIT2",
	StateTimeWait:    "TIME_WAIT",
	StateClose:       "CLOSE",
	StateCloseWait:   "CLOSE_WAIT",
	StateLastAck:     "LAST_ACK",
	StateListen:      "LISTEN",
	StateClosing:     "CLOSING",
	StateNewSynRecv:  "NEW_SYN_RECV",
}

// StateName returns "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1",
// "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN",
// "CLOSING", "NEW_SYN_RECV", or "unknown:N".

func StateName(s uint8) string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "unknown:" + strconv.Itoa(int(s))
}

// Layout of the sock_diag structures (include/uapi/linux/inet_diag.h).
// golang.org/x/sys/unix has the constants but not these structs.
const (
	sizeofInetDiagSockID = 48 // sport, dport (be16), src[4], dst[4] (be32), if, cookie[2]
	sizeofInetDiagReqV2  = 8 + sizeofInetDiagSockID
	sizeofInetDiagMsg    = 4 + sizeofInetDiagSockID + 20 // + expires, rqueue, wqueue, uid, inode

	allStates = 0xffffffff // idiag_states: every state, incl. TIME_WAIT and NEW_SYN_RECV

	recvBufSize = 1 << 16 // larger than any netlink dump skb (≤ 32 KiB)
)

// DumpSockets lists the TCP (and with udp also UDP) sockets of the netns,
// IPv4 and IPv6, every state, with one sock_diag dump request per family and
// protocol (SOCK_DIAG_BY_FAMILY, inet_diag_req_v2, idiag_states = all).
//
// The NETLINK_SOCK_DIAG socket is created on a thread inside the netns, so
// the dump covers that namespace only. IPv4 traffic on dual-stack IPv6
// sockets is reported with Family AF_INET6 and unmapped (IPv4) addresses.
// TIME_WAIT and NEW_SYN_RECV entries have Inode 0 and UID 0.
//
// When the kernel cannot dump a family (inet_diag, tcp_diag or udp_diag is a
// module that is not loaded), the netns's /proc/net/{tcp,tcp6,udp,udp6} are
// read instead, with the same fields; that is logged once (see SetLogger).
func (n *Netns) DumpSockets(udp bool) ([]Socket, error) {
	var socks []Socket
	if err := n.EachSocket(udp, func(s *Socket) { socks = append(socks, *s) }); err != nil {
		return nil, err
	}
	return socks, nil
}

// EachSocket is DumpSockets handing each socket to each as it is read,
// nothing kept: its memory does not grow with the netns's sockets. each
// runs on the thread inside the netns; its Socket is valid during the call.
func (n *Netns) EachSocket(udp bool, each func(*Socket)) error {
	err := n.ns.Do(func() error {
		d, err := openSockDiag()
		if err != nil && !noHandler(err) {
			return err
		}
		if d != nil {
			defer d.close()
		}
		protos := []uint8{unix.IPPROTO_TCP}
		if udp {
			protos = append(protos, unix.IPPROTO_UDP)
		}
		for _, proto := range protos {
			for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
				if err := eachInet(d, family, proto, each); err != nil {
					return fmt.Errorf("dump %s %s: %w", famName(family), protoName(proto), err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netdiag: DumpSockets in %s: %w", nsLink(n.inode), err)
	}
	return nil
}

// sockDiag is a NETLINK_SOCK_DIAG socket and its receive buffer.
type sockDiag struct {
	fd  int
	buf []byte
	seq uint32
}

// openSockDiag opens a NETLINK_SOCK_DIAG socket in the calling thread's netns.
func openSockDiag() (*sockDiag, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("socket(NETLINK_SOCK_DIAG): %w", err)
	}
	// A dump that stalls must not hang the caller forever.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("setsockopt(SO_RCVTIMEO): %w", err)
	}
	return &sockDiag{fd: fd, buf: make([]byte, recvBufSize)}, nil
}

func (d *sockDiag) close() { unix.Close(d.fd) }

// eachInetNetlink calls each for the sockets of one family and protocol as
// sock_diag reports them.
func (d *sockDiag) eachInetNetlink(family, proto uint8, each func(*Socket)) error {
	var req [unix.SizeofNlMsghdr + sizeofInetDiagReqV2]byte
	r := req[unix.SizeofNlMsghdr:]
	r[0] = family // sdiag_family
	r[1] = proto  // sdiag_protocol
	r[2] = 0      // idiag_ext: no attributes wanted
	binary.NativeEndian.PutUint32(r[4:], allStates)
	// id left zero: no filter.
	return d.dump(req[:], func(payload []byte) {
		if s, ok := parseInetDiagMsg(payload, proto); ok {
			each(&s)
		}
	})
}

// dump sends one SOCK_DIAG_BY_FAMILY dump request (req: room for the
// netlink header, then the request) and calls each for the payload of every
// reply message.
func (d *sockDiag) dump(req []byte, each func(payload []byte)) error {
	ne := binary.NativeEndian
	d.seq++
	seq := d.seq
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	ne.PutUint32(req[12:], 0) // nlmsg_pid: the kernel
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for {
		nr, _, rflags, _, err := unix.Recvmsg(d.fd, d.buf, nil, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("recv: %w", err)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("recv: reply truncated (buffer %d bytes)", len(d.buf))
		}
		done, err := walkReply(d.buf[:nr], seq, each)
		if err != nil || done {
			return err
		}
	}
}

// walkReply calls each for the SOCK_DIAG_BY_FAMILY messages of one netlink
// datagram and reports whether the dump is done.
func walkReply(b []byte, seq uint32, each func([]byte)) (bool, error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		mlen := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		mseq := ne.Uint32(b[8:])
		if mlen < unix.SizeofNlMsghdr || mlen > len(b) {
			return false, fmt.Errorf("malformed netlink message (length %d, %d bytes left)", mlen, len(b))
		}
		payload := b[unix.SizeofNlMsghdr:mlen]
		b = b[min(nlmAlign(mlen), len(b)):]
		if mseq != seq {
			continue // stale reply to an earlier request
		}
		switch typ {
		case unix.NLMSG_DONE:
			// For dumps the payload is an int: 0, or -errno if the dump failed.
			if len(payload) >= 4 {
				if e := int32(ne.Uint32(payload)); e < 0 {
					return true, unix.Errno(-e)
				}
			}
			return true, nil
		case unix.NLMSG_ERROR:
			if len(payload) < 4 {
				return true, errors.New("short NLMSG_ERROR")
			}
			if e := int32(ne.Uint32(payload)); e != 0 {
				return true, unix.Errno(-e)
			}
			// an ACK, not an error
		case unix.SOCK_DIAG_BY_FAMILY:
			each(payload)
		}
	}
	return false, nil
}

// nlmAlign rounds a netlink message length up to NLMSG_ALIGNTO (4).
func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// parseInetDiagMsg decodes a struct inet_diag_msg (attributes after it are
// ignored).
func parseInetDiagMsg(p []byte, proto uint8) (Socket, bool) {
	if len(p) < sizeofInetDiagMsg {
		return Socket{}, false
	}
	ne := binary.NativeEndian
	s := Socket{Family: p[0], Proto: proto, State: p[1]}
	id := p[4 : 4+sizeofInetDiagSockID]
	sport := binary.BigEndian.Uint16(id[0:])
	dport := binary.BigEndian.Uint16(id[2:])
	src, dst := id[4:20], id[20:36]
	var la, ra netip.Addr
	switch s.Family {
	case unix.AF_INET:
		la = netip.AddrFrom4([4]byte(src[:4]))
		ra = netip.AddrFrom4([4]byte(dst[:4]))
	case unix.AF_INET6:
		la = netip.AddrFrom16([16]byte(src)).Unmap()
		ra = netip.AddrFrom16([16]byte(dst)).Unmap()
	default:
		return Socket{}, false
	}
	s.Local = netip.AddrPortFrom(la, sport)
	s.Remote = netip.AddrPortFrom(ra, dport)
	tail := p[4+sizeofInetDiagSockID:]
	// tail: expires, rqueue, wqueue, uid, inode (all u32).
	s.UID = ne.Uint32(tail[12:])
	s.Inode = uint64(ne.Uint32(tail[16:]))
	return s, true
}

func famName(f uint8) string {
	if f == unix.AF_INET6 {
		return "inet6"
	}
	return "inet"
}

func protoName(p uint8) string {
	if p == unix.IPPROTO_UDP {
		return "udp"
	}
	return "tcp"
}
