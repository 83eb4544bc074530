package diagnose

import (
	"fmt"
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
	cut    int         // sockets the snapshot did not keep, past MaxSnapshotSockets
}

// MaxSnapshotSockets bounds the sockets one snapshot keeps (about 120
// bytes each): past it the rest are counted (portScene.cut) and the
// diagnosis says it read part of the netns.
const MaxSnapshotSockets = 1 << 17

// focus says which sockets of a netns a snapshot keeps, so that a netns of
// any size costs a diagnosis what its verdict needs, not all its sockets.
type focus struct {
	// dst: a connect() toward it: the sockets toward it, the listeners,
	// and of the others one socket a port for each thing the model tells
	// apart on a port (its bucket made by bind(), by connect(), or not
	// read): the port's verdict toward dst is the same, and who holds it
	// is named from the sockets kept. Invalid: see all.
	dst netip.AddrPort
	// all: every socket (bind(): every socket on a port can conflict).
	// Neither dst nor all: the ports the netns serves on only
	// (servedPorts: listeners, bound UDP sockets).
	all bool
}

// keeper is the filter of f, with the ports it kept a socket of.
func (f focus) keeper() func(*portmodel.Socket) bool {
	var held, connected, unknown, udp portmodel.PortSet
	dst := netip.AddrPortFrom(f.dst.Addr().Unmap(), f.dst.Port())
	first := func(set *portmodel.PortSet, port uint16) bool {
		if set.Has(port) {
			return false
		}
		set.Add(port)
		return true
	}
	return func(s *portmodel.Socket) bool {
		port := s.Local.Port()
		switch {
		case f.all, s.Proto == portmodel.TCP && s.State == netdiag.StateListen:
			return true
		case s.Proto == portmodel.UDP:
			return first(&udp, port) // served ports: one socket a port
		case !f.dst.IsValid():
			return false
		case netip.AddrPortFrom(s.Remote.Addr().Unmap(), s.Remote.Port()) == dst:
			return true
		case s.Bucket == portmodel.BucketByBind || s.State == netdiag.StateClose:
			return first(&held, port)
		case s.Bucket == portmodel.BucketByConnect:
			return first(&connected, port)
		}
		return first(&unknown, port)
	}
}

// readPorts reads the netns's sockets (the BPF socket iterator when there
// is one, else sock_diag) and sysctls, keeping the sockets f wants, at most
// MaxSnapshotSockets. The UDP sockets are read in any case, for the ports
// the netns serves on; the model gets them only with udp (then all of
// them: a UDP autobind's verdict is theirs).
func readPorts(ns *netdiag.Netns, it netdiag.SocketReader, udp bool, f focus) (*portScene, error) {
	keep := f.keeper()
	if udp {
		tcp := keep
		keep = func(s *portmodel.Socket) bool { return s.Proto == portmodel.UDP || tcp(s) }
	}
	sc, socks, src, cut, err := ns.PortSnapshot(it, true, keep, MaxSnapshotSockets)
	if err != nil {
		return nil, err
	}
	served := servedPorts(sc, socks)
	if !udp {
		socks = netdiag.OnlyTCP(socks)
	}
	p := &portScene{ns: ns, sc: sc, socks: socks, source: string(src), served: served, cut: cut}
	if p.tcp, err = ns.TCPSysctls(); err != nil {
		return nil, err
	}
	return p, nil
}

// cutWords is what a verdict adds when the snapshot left sockets out.
func cutWords(p *portScene) string {
	if p.cut == 0 {
		return ""
	}
	return fmt.Sprintf(" (the netns holds more sockets that matter here than eaddr keeps: it read %d and left %d, so the counts are the least there are)", len(p.socks), p.cut)
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
