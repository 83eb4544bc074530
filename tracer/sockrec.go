package tracer

import (
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// SockRec is one record of the socket iterators, as bpf/sockiter.h lays it out.
type SockRec = sockiterSockRec

// SockRecSize is the size of one SockRec in an iterator's output.
const SockRecSize = int(unsafe.Sizeof(SockRec{}))

// Where a SockRec came from (bpf/sockiter.h enum sockiter_source).
const (
	SockSrcTCP  = uint8(sockiterSockiterSourceSOCKITER_SRC_TCP)
	SockSrcUDP  = uint8(sockiterSockiterSourceSOCKITER_SRC_UDP)
	SockSrcFile = uint8(sockiterSockiterSourceSOCKITER_SRC_FILE)
	// Not sockets: the node walk's markers (bpf/sockiter.h).
	SockSrcCut   = uint8(sockiterSockiterSourceSOCKITER_SRC_CUT)
	SockSrcChunk = uint8(sockiterSockiterSourceSOCKITER_SRC_CHUNK)
	SockSrcEnd   = uint8(sockiterSockiterSourceSOCKITER_SRC_END)
)

// Flags in SockRec.Flags (bpf/sockiter.h enum sockiter_flag).
const (
	SockBucket    = uint16(sockiterSockiterFlagSOCKITER_F_BUCKET)
	SockOpts      = uint16(sockiterSockiterFlagSOCKITER_F_OPTS)
	SockReusePort = uint16(sockiterSockiterFlagSOCKITER_F_REUSEPORT)
	SockOrphan    = uint16(sockiterSockiterFlagSOCKITER_F_ORPHAN)
	SockTW        = uint16(sockiterSockiterFlagSOCKITER_F_TW)
	SockTWEntry   = uint16(sockiterSockiterFlagSOCKITER_F_TW_ENTRY)
	SockReq       = uint16(sockiterSockiterFlagSOCKITER_F_REQ)
)

// Address families of SockRec.Family (Linux's values).
const (
	afInet  = 2
	afInet6 = 10
)

// Sockets turns the records of one read of the iterators of netns into the
// port model's sockets, as Each hands them on: a socket only bound that
// several fds hold is kept once, and a socket seen only bound and then
// again in the hash tables (it connected or listened between the two
// reads) is kept as first seen. nowMS is CLOCK_MONOTONIC in ms at the read,
// against which the kernel's u32 tw_entry_stamp is widened. A record of
// another netns, or of a family or protocol the programs never write, is
// an error: the filter failed, and no answer is better than a wrong one.
func Sockets(recs []SockRec, netns uint32, nowMS int64) ([]portmodel.Socket, error) {
	socks := make([]portmodel.Socket, 0, len(recs))
	h := recHandler{netns: netns, nowMS: nowMS, fn: func(s *portmodel.Socket) { socks = append(socks, *s) }, seen: map[uint64]bool{}}
	for i := range recs {
		if err := h.record(&recs[i]); err != nil {
			return nil, err
		}
	}
	return socks, nil
}

// Socket is one record in the port model's terms; nowMS as for Sockets.
func Socket(r *SockRec, nowMS int64) (portmodel.Socket, error) { return socket(r, nowMS) }

// socket is one record in the port model's terms.
func socket(r *SockRec, nowMS int64) (portmodel.Socket, error) {
	var s portmodel.Socket
	switch r.Proto {
	case uint8(portmodel.TCP), uint8(portmodel.UDP):
		s.Proto = portmodel.Proto(r.Proto)
	default:
		return s, fmt.Errorf("socket iterator: protocol unknown:%d (%s)", r.Proto, fmtRec(r))
	}
	local, remote, err := recAddrs(r)
	if err != nil {
		return s, err
	}
	s.State, s.Local, s.UID, s.Inode = r.State, local, r.Uid, r.Inode
	if remote.Port() != 0 || !remote.Addr().IsUnspecified() {
		s.Remote = remote
	}
	if s.Proto == portmodel.TCP && r.Flags&SockBucket != 0 {
		s.Bucket = portmodel.BucketByConnect
		if r.Fastreuse >= 0 || r.Fastreuseport >= 0 {
			s.Bucket = portmodel.BucketByBind
		}
	}
	if r.Flags&SockOpts != 0 {
		s.Known = true
		s.Reuse = r.Reuse != 0
		s.ReusePort = r.Flags&SockReusePort != 0
		s.BoundDev = int(r.BoundDevIf)
	}
	s.Orphan = r.Flags&SockOrphan != 0
	if r.Flags&SockTW != 0 {
		s.TW = portmodel.TimeWait{Known: true, TSRecent: r.TwTsRecentStamp != 0, StampSec: r.TwTsRecentStamp}
		if r.Flags&SockTWEntry != 0 {
			s.TW.StampMS = widenMS(r.TwEntryStamp, nowMS)
		}
	}
	return s, nil
}

// recAddrs are the local and remote addresses of r, v4-mapped ones unmapped.
func recAddrs(r *SockRec) (local, remote netip.AddrPort, err error) {
	var la, ra netip.Addr
	switch r.Family {
	case afInet:
		la, ra = netip.AddrFrom4([4]byte(r.Saddr[:4])), netip.AddrFrom4([4]byte(r.Daddr[:4]))
	case afInet6:
		la, ra = netip.AddrFrom16(r.Saddr).Unmap(), netip.AddrFrom16(r.Daddr).Unmap()
	default:
		return local, remote, fmt.Errorf("socket iterator: address family unknown:%d (%s)", r.Family, fmtRec(r))
	}
	return netip.AddrPortFrom(la, r.Sport), netip.AddrPortFrom(ra, r.Dport), nil
}

// widenMS turns the kernel's u32 ms (tcp_clock_ms truncated) into ms of
// CLOCK_MONOTONIC, the one nearest nowMS: right while the stamp is less
// than 24 days from now (a TIME_WAIT lasts a minute).
func widenMS(stamp uint32, nowMS int64) int64 {
	return nowMS - int64(int32(uint32(nowMS)-stamp))
}

func fmtRec(r *SockRec) string {
	return fmt.Sprintf("source %d proto %d family %d state %d port %d inode %d", r.Source, r.Proto, r.Family, r.State, r.Sport, r.Inode)
}
