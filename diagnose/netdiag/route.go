package netdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// SourceFor is the source address the netns's routing gives a connect() to
// dst that was not bound first (RTM_GETROUTE, as `ip route get` asks): the
// 4-tuple a new connection toward dst would use.
func (n *Netns) SourceFor(dst netip.Addr) (netip.Addr, error) {
	var src netip.Addr
	err := n.ns.Do(func() error {
		var err error
		src, err = routeSource(dst)
		return err
	})
	if err != nil {
		return src, fmt.Errorf("netdiag: route to %s in %s: %w", dst, nsLink(n.inode), err)
	}
	return src, nil
}

func routeSource(dst netip.Addr) (netip.Addr, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return netip.Addr{}, err
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return netip.Addr{}, err
	}
	if err := unix.Sendto(fd, routeRequest(dst), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return netip.Addr{}, err
	}
	buf := make([]byte, 8192)
	nr, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return netip.Addr{}, err
	}
	return parseRouteReply(buf[:nr])
}

// routeRequest is an RTM_GETROUTE for the one address dst.
func routeRequest(dst netip.Addr) []byte {
	a := dst.AsSlice()
	fam := byte(unix.AF_INET)
	if dst.Is6() {
		fam = unix.AF_INET6
	}
	rta := 4 + len(a)
	n := unix.SizeofNlMsghdr + unix.SizeofRtMsg + rta
	b := make([]byte, n)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(n))
	ne.PutUint16(b[4:], unix.RTM_GETROUTE)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], 1)
	r := b[unix.SizeofNlMsghdr:]
	r[0] = fam              // rtm_family
	r[1] = byte(8 * len(a)) // rtm_dst_len
	at := r[unix.SizeofRtMsg:]
	ne.PutUint16(at[0:], uint16(rta))
	ne.PutUint16(at[2:], unix.RTA_DST)
	copy(at[4:], a)
	return b
}

func parseRouteReply(b []byte) (netip.Addr, error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return netip.Addr{}, unix.Errno(-e)
				}
			}
		case syscall.RTM_NEWROUTE:
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil {
				return netip.Addr{}, err
			}
			for _, at := range attrs {
				if at.Attr.Type == unix.RTA_PREFSRC {
					if a, ok := netip.AddrFromSlice(at.Value); ok {
						return a.Unmap(), nil
					}
				}
			}
			return netip.Addr{}, errors.New("the route has no preferred source")
		}
	}
	return netip.Addr{}, errors.New("no route in the reply")
}
