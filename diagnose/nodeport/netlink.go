package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The netlink plumbing shared by the IPVS (generic netlink) and nftables
// (nfnetlink) readers: one socket per reader, opened on the calling thread,
// so in its network namespace.

const (
	recvBufSize = 1 << 16 // larger than any dump skb the kernel sends (≤ 32 KiB)
	nlaAlign    = 4
	nlaHdrLen   = 4
	nlaNested   = 0x8000 // NLA_F_NESTED
	nlaTypeMask = 0x3fff // NLA_TYPE_MASK
)

// conn is a netlink socket and its receive buffer.
type conn struct {
	fd  int
	buf []byte
	seq uint32
}

// dial opens a netlink socket of protocol proto (unix.NETLINK_GENERIC,
// unix.NETLINK_NETFILTER) in the calling thread's network namespace.
func dial(proto int) (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_NETLINK, %d): %w", proto, err)
	}
	// A reply that never comes must not hang the diagnosis.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("setsockopt(SO_RCVTIMEO): %w", err)
	}
	return &conn{fd: fd, buf: make([]byte, recvBufSize)}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// request sends one message of type typ with flags (NLM_F_REQUEST is
// added) and body, and calls each with the payload of every reply message
// until the kernel says it is done: NLMSG_DONE for a dump, the ACK of
// NLM_F_ACK otherwise. An NLMSG_ERROR (or a dump's NLMSG_DONE) carrying an
// errno is returned as that unix.Errno.
func (c *conn) request(typ, flags uint16, body []byte, each func(payload []byte) error) error {
	ne := binary.NativeEndian
	c.seq++
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], typ)
	ne.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST)
	ne.PutUint32(msg[8:], c.seq)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for {
		n, _, rflags, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("recv: %w", err)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("recv: reply truncated (buffer %d bytes)", len(c.buf))
		}
		done, err := c.walk(c.buf[:n], each)
		if err != nil || done {
			return err
		}
	}
}

// walk goes through the messages of one datagram; done at NLMSG_DONE or an
// NLMSG_ERROR (an ACK when its errno is 0).
func (c *conn) walk(b []byte, each func([]byte) error) (bool, error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(b[0:]))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return true, fmt.Errorf("malformed netlink message (length %d of %d)", l, len(b))
		}
		typ, seq, payload := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[unix.SizeofNlMsghdr:l]
		if next := align(l); next < len(b) {
			b = b[next:]
		} else {
			b = nil
		}
		if seq != c.seq {
			continue // a late answer to an earlier request
		}
		switch typ {
		case unix.NLMSG_DONE, unix.NLMSG_ERROR:
			if len(payload) >= 4 {
				if e := int32(ne.Uint32(payload)); e < 0 {
					return true, unix.Errno(-e)
				}
			}
			return true, nil
		}
		if err := each(payload); err != nil {
			return true, err
		}
	}
	return false, nil
}

func align(n int) int { return (n + nlaAlign - 1) &^ (nlaAlign - 1) }

// attrs calls fn for each attribute of b, with its type (nested flag and
// byte-order flag cleared) and data. A malformed attribute ends the walk
// with an error: the rest of b cannot be trusted.
func attrs(b []byte, fn func(typ uint16, data []byte)) error {
	ne := binary.NativeEndian
	for len(b) >= nlaHdrLen {
		l := int(ne.Uint16(b[0:]))
		if l < nlaHdrLen || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d of %d)", l, len(b))
		}
		fn(ne.Uint16(b[2:])&nlaTypeMask, b[nlaHdrLen:l])
		if next := align(l); next < len(b) {
			b = b[next:]
		} else {
			b = nil
		}
	}
	return nil
}

// putAttr appends an attribute of type typ holding data, padded.
func putAttr(b []byte, typ uint16, data []byte) []byte {
	var h [nlaHdrLen]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(nlaHdrLen+len(data)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h[:]...)
	b = append(b, data...)
	for len(b)%nlaAlign != 0 {
		b = append(b, 0)
	}
	return b
}

// putString appends a NUL-terminated string attribute.
func putString(b []byte, typ uint16, s string) []byte {
	return putAttr(b, typ, append([]byte(s), 0))
}

// cstring is a NUL-terminated string attribute's text.
func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
