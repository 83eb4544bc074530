package diagnose

import (
	"net/netip"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// portScene is what one snapshot read of a netns's ports: the model's
// inputs, where the sockets came from, and the TCP settings fixes depend on.
type portScene struct {
	ns     *netdiag.Netns
	sc     portmodel.Sysctls
	socks  []portmodel.Socket
	source string // "iterator", or "sock_diag: <why the iterator was not used>"
	tcp    netdiag.TCPSysctls
	bind   bool // the failure is a bind() to port 0, not a connect()
	// served are the ports the netns serves on (servedPorts), which a
	// range a fix advises must keep clear of or reserve.
	served []int
	pod    *decode.Pod // the failing process's pod, if any: a hint to whose the netns is
	own    *owner      // whose the netns is, once a fix asked (Diagnoser.owner)
}

// readPorts reads the netns's sockets (the BPF socket iterator when there
// is one, else sock_diag) and sysctls. The UDP sockets are read in any
// case, for the ports the netns serves on; the model gets them only with
// udp.
func readPorts(ns *netdiag.Netns, it netdiag.SocketReader, udp bool) (*portScene, error) {
	sc, socks, src, err := ns.PortSnapshot(it, true)
	if err != nil {
		return nil, err
	}
	served := servedPorts(sc, socks)
	if !udp {
		socks = netdiag.OnlyTCP(socks)
	}
	p := &portScene{ns: ns, sc: sc, socks: socks, source: string(src), served: served}
	if p.tcp, err = ns.TCPSysctls(); err != nil {
		return nil, err
	}
	return p, nil
}

// usable is the number of ports of the range that are not reserved.
func (p *portScene) usable() int { return p.sc.Unreserved(p.sc.Lo, p.sc.Hi) }

// sourceFor is the local address a connect() toward dst uses: the one the
// socket was bound to, else the route's. Unknown (invalid) when neither
// can be read: the model then matches every local address.
func (p *portScene) sourceFor(bound netip.Addr, dst netip.Addr) netip.Addr {
	if bound.IsValid() && !bound.IsUnspecified() {
		return bound.Unmap()
	}
	src, err := p.ns.SourceFor(dst)
	if err != nil {
		return netip.Addr{}
	}
	return src
}

// inodesOf maps the inodes of socks[idx...] to how many of them each holds.
func (p *portScene) inodesOf(idx []int) map[uint64]int {
	out := map[uint64]int{}
	for _, i := range idx {
		if ino := p.socks[i].Inode; ino != 0 {
			out[ino]++
		}
	}
	return out
}
