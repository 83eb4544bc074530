package decode

import (
	"net/netip"
	"time"

	"github.com/eaddr/eaddr/tracer"
)

// Flow is one direction of a flow: protocol, source and destination.
type Flow struct {
	Proto    uint8 // unix.IPPROTO_TCP, IPPROTO_UDP
	Src, Dst netip.AddrPort
}

// NodeDrop is a packet the node threw away that opened a new flow (a bare
// SYN, a UDP packet without a confirmed conntrack entry), decoded from
// bpf/nodedrop.h's record.
type NodeDrop struct {
	Time        time.Time
	NetNS       uint32
	NetNSCookie uint64
	Reason      string // enum skb_drop_reason's name on this kernel ("NETFILTER_DROP")
	Location    uint64 // the kernel address that freed it
	InIfindex   int    // the device it came in on (0: a packet of this host)
	OutIfindex  int
	OutDev      string // the device it had at the drop, by the kernel's name
	// Orig is the flow as its sender made it: the conntrack entry's
	// original tuple when there was one (a pod's own 4-tuple; behind a
	// ClusterIP, the ClusterIP it asked for), else the IP header.
	Orig Flow
	// Reply is the entry's reply tuple (HasCT): after SNAT, Dst is the
	// node's address and the port MASQUERADE chose.
	Reply     Flow
	Header    Flow // the IP header as dropped (after SNAT: the node's address)
	HasCT     bool
	Confirmed bool // the entry was in the table already
	SrcNAT    bool // its source NAT was done
	CTStatus  uint64
}

// DecodeNodeDrop decodes r; reason names a drop reason number (the
// tracer's, read from BTF), clock turns boot time into wall time.
func DecodeNodeDrop(r *tracer.NodeDropRecord, reason func(uint32) string, clock *BootClock) NodeDrop {
	v6 := r.Family == AFInet6
	flow := func(src, dst [16]byte, sport, dport uint16) Flow {
		return Flow{Proto: r.Protocol, Src: netip.AddrPortFrom(ipOf(v6, src), sport), Dst: netip.AddrPortFrom(ipOf(v6, dst), dport)}
	}
	d := NodeDrop{
		Time: clock.Wall(r.BootNs), NetNS: r.Netns, NetNSCookie: r.NetnsCookie, Reason: reason(r.Reason),
		Location: r.Location, InIfindex: int(r.InIfindex), OutIfindex: int(r.OutIfindex), OutDev: cString(r.Dev[:]),
		Header:    flow(r.HdrSrc, r.HdrDst, r.HdrSport, r.HdrDport),
		HasCT:     r.Flags&tracer.DropFlagCT != 0,
		Confirmed: r.Flags&tracer.DropFlagConfirmed != 0,
		SrcNAT:    r.Flags&tracer.DropFlagSrcNAT != 0,
		CTStatus:  r.CtStatus,
	}
	d.Orig = d.Header
	if d.HasCT {
		d.Orig = flow(r.CtSrc, r.CtDst, r.CtSport, r.CtDport)
		d.Reply = flow(r.RpSrc, r.RpDst, r.RpSport, r.RpDport)
	}
	return d
}

func ipOf(v6 bool, b [16]byte) netip.Addr {
	if v6 {
		return netip.AddrFrom16(b).Unmap()
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// cString is a NUL-terminated kernel name (a device's: no workload's text).
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
