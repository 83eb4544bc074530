package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Conntrack over CTNETLINK (nfnetlink subsystem 1), read as conntrack(8)
// reads it: -S (IPCTNL_MSG_CT_GET_STATS_CPU, one message per CPU), -C
// (IPCTNL_MSG_CT_GET_STATS: the netns's entries and nf_conntrack_max) and
// -L (IPCTNL_MSG_CT_GET dump), from the calling thread's network namespace
// (include/uapi/linux/netfilter/nfnetlink_conntrack.h).
const (
	ctnlSubsys       = 1 // NFNL_SUBSYS_CTNETLINK
	ctMsgGet         = 1 // IPCTNL_MSG_CT_GET
	ctMsgGetStatsCPU = 4 // IPCTNL_MSG_CT_GET_STATS_CPU
	ctMsgGetStats    = 5 // IPCTNL_MSG_CT_GET_STATS

	ctaStatsInsertFailed = 9  // CTA_STATS_INSERT_FAILED
	ctaStatsDrop         = 10 // CTA_STATS_DROP
	ctaStatsEarlyDrop    = 11 // CTA_STATS_EARLY_DROP
	ctaStatsClashResolve = 14 // CTA_STATS_CLASH_RESOLVE
	ctaGlobalEntries     = 1  // CTA_STATS_GLOBAL_ENTRIES
	ctaGlobalMaxEntries  = 2  // CTA_STATS_GLOBAL_MAX_ENTRIES (5.? kernels: absent, Max stays 0)

	ctaTupleOrig  = 1 // CTA_TUPLE_ORIG
	ctaTupleReply = 2 // CTA_TUPLE_REPLY
	ctaStatus     = 3 // CTA_STATUS
	ctaTupleIP    = 1 // CTA_TUPLE_IP
	ctaTupleProto = 2 // CTA_TUPLE_PROTO
	ctaIPv4Src    = 1 // CTA_IP_V4_SRC
	ctaIPv4Dst    = 2
	ctaIPv6Src    = 3
	ctaIPv6Dst    = 4
	ctaProtoNum   = 1 // CTA_PROTO_NUM
	ctaProtoSrc   = 2 // CTA_PROTO_SRC_PORT
	ctaProtoDst   = 3 // CTA_PROTO_DST_PORT

	// IPSSrcNAT is IPS_SRC_NAT in an entry's Status: its source was
	// rewritten (MASQUERADE, SNAT), so its reply tuple's destination is the
	// node's address and the port NAT chose.
	IPSSrcNAT = 1 << 4
)

// ConntrackCounters are conntrack's counters of one netns, summed over
// its CPUs, as `conntrack -S` shows them per CPU.
type ConntrackCounters struct {
	InsertFailed uint64 // an entry could not be inserted (clash: SNAT found no free tuple; chain too long)
	Drop         uint64 // packets conntrack dropped (a failed insert, no entry could be made: table full)
	EarlyDrop    uint64 // entries evicted to make room in a full table
	ClashResolve uint64 // clashes resolved without a drop
	CPUs         int
	Source       string // SourceCTNetlink, or SourceProcStat without CAP_NET_ADMIN
}

// ReadConntrackCounters reads the per-CPU counters of the calling thread's
// netns and sums them: over CTNETLINK, else (no CAP_NET_ADMIN) from
// /proc/net/stat/nf_conntrack.
func ReadConntrackCounters() (ConntrackCounters, error) {
	s, err := readCountersNetlink()
	if refused(err) {
		return readCountersProc()
	}
	return s, err
}

func readCountersNetlink() (ConntrackCounters, error) {
	s := ConntrackCounters{Source: SourceCTNetlink}
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return s, err
	}
	defer c.close()
	err = ctRequest(c, ctMsgGetStatsCPU, unix.AF_UNSPEC, unix.NLM_F_DUMP, func(b []byte) error {
		s.CPUs++
		return attrs(b, func(typ uint16, d []byte) {
			if len(d) < 4 {
				return
			}
			v := uint64(binary.BigEndian.Uint32(d))
			switch typ {
			case ctaStatsInsertFailed:
				s.InsertFailed += v
			case ctaStatsDrop:
				s.Drop += v
			case ctaStatsEarlyDrop:
				s.EarlyDrop += v
			case ctaStatsClashResolve:
				s.ClashResolve += v
			}
		})
	})
	if err != nil {
		return s, fmt.Errorf("conntrack counters (IPCTNL_MSG_CT_GET_STATS_CPU): %w", noConntrack(err))
	}
	return s, nil
}

// ConntrackUse reads the netns's conntrack entries and nf_conntrack_max
// (0 when the kernel does not say): over CTNETLINK, else (no
// CAP_NET_ADMIN) from the net.netfilter sysctls.
func ConntrackUse() (count, max uint64, err error) {
	count, max, err = useNetlink()
	if refused(err) {
		return useProc()
	}
	return count, max, err
}

func useNetlink() (count, max uint64, err error) {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, 0, err
	}
	defer c.close()
	err = ctRequest(c, ctMsgGetStats, unix.AF_UNSPEC, 0, func(b []byte) error {
		return attrs(b, func(typ uint16, d []byte) {
			if len(d) < 4 {
				return
			}
			switch typ {
			case ctaGlobalEntries:
				count = uint64(binary.BigEndian.Uint32(d))
			case ctaGlobalMaxEntries:
				max = uint64(binary.BigEndian.Uint32(d))
			}
		})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("conntrack use (IPCTNL_MSG_CT_GET_STATS): %w", noConntrack(err))
	}
	return count, max, nil
}

// noConntrack says what ENOENT/EOPNOTSUPP from CTNETLINK means.
func noConntrack(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("%w (no nf_conntrack_netlink in this kernel)", err)
	}
	return err
}

// ctRequest sends one CTNETLINK request for family fam and calls each with
// the attributes of every reply (after nfgenmsg).
func ctRequest(c *conn, msg uint16, fam uint8, flags uint16, each func(b []byte) error) error {
	body := []byte{fam, unix.NFNETLINK_V0, 0, 0}
	if flags&unix.NLM_F_DUMP == 0 {
		flags |= unix.NLM_F_ACK // a dump ends with NLMSG_DONE; a get with its ACK
	}
	return c.request(ctnlSubsys<<8|msg, flags, body, func(p []byte) error {
		if len(p) < 4 {
			return fmt.Errorf("short nfnetlink message (%d bytes)", len(p))
		}
		return each(p[4:])
	})
}

// CTTuple is one direction of a conntrack entry.
type CTTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// CTEntry is one conntrack entry of a dump.
type CTEntry struct {
	Proto       uint8
	Orig, Reply CTTuple
	Status      uint32
}

// DumpConntrack walks the conntrack table of the calling thread's netns,
// family fam (unix.AF_INET, unix.AF_INET6), calling fn with each entry as
// it is read: the table (up to nf_conntrack_max, a million on a big node)
// is never held, and e is reused (fn copies what it keeps).
func DumpConntrack(fam uint8, fn func(e *CTEntry)) error {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return err
	}
	defer c.close()
	var e CTEntry
	err = ctRequest(c, ctMsgGet, fam, unix.NLM_F_DUMP, func(b []byte) error {
		e = CTEntry{}
		err := attrs(b, func(typ uint16, d []byte) {
			switch typ {
			case ctaTupleOrig:
				e.Proto = parseTuple(d, &e.Orig)
			case ctaTupleReply:
				parseTuple(d, &e.Reply)
			case ctaStatus:
				if len(d) >= 4 {
					e.Status = binary.BigEndian.Uint32(d)
				}
			}
		})
		if err == nil {
			fn(&e)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("conntrack dump (IPCTNL_MSG_CT_GET): %w", noConntrack(err))
	}
	return nil
}

// parseTuple reads a nested CTA_TUPLE_* into t; its protocol number.
func parseTuple(b []byte, t *CTTuple) (proto uint8) {
	attrs(b, func(typ uint16, d []byte) {
		switch typ {
		case ctaTupleIP:
			attrs(d, func(typ uint16, a []byte) {
				addr, ok := netip.AddrFromSlice(a)
				if !ok {
					return
				}
				switch typ {
				case ctaIPv4Src, ctaIPv6Src:
					t.Src = addr
				case ctaIPv4Dst, ctaIPv6Dst:
					t.Dst = addr
				}
			})
		case ctaTupleProto:
			attrs(d, func(typ uint16, a []byte) {
				switch {
				case typ == ctaProtoNum && len(a) >= 1:
					proto = a[0]
				case typ == ctaProtoSrc && len(a) >= 2:
					t.SrcPort = binary.BigEndian.Uint16(a)
				case typ == ctaProtoDst && len(a) >= 2:
					t.DstPort = binary.BigEndian.Uint16(a)
				}
			})
		}
	})
	return proto
}
