package netdiag

import (
	"fmt"
	"net"
	"net/netip"
)

// Addrs lists the IP addresses configured on the interfaces of the netns,
// with their prefix lengths (e.g. 127.0.0.1/8, ::1/128). net.InterfaceAddrs
// is called on a thread inside the namespace: it makes its RTM_GETADDR and
// RTM_GETLINK netlink requests synchronously from that thread. IPv6
// link-local addresses carry no zone.
func (n *Netns) Addrs() ([]netip.Prefix, error) {
	var addrs []net.Addr
	err := n.ns.Do(func() error {
		var err error
		addrs, err = net.InterfaceAddrs()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netdiag: Addrs in %s: %w", nsLink(n.inode), err)
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ones, bits := ipn.Mask.Size()
		if ip.Is4In6() && bits == 32 {
			ip = ip.Unmap()
		}
		if bits != ip.BitLen() {
			continue
		}
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out, nil
}
