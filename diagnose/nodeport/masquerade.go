package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The node's MASQUERADE rules, from every nftables rule of the families
// ip, ip6 and inet: nft's own masquerade (expression "masq", its port
// range in the registers an "immediate" loaded), and iptables-nft's
// (`-j MASQUERADE [--to-ports LO-HI] [--random-fully]`: the x_tables target
// run through nft_compat, struct nf_nat_ipv4_multi_range_compat for IPv4,
// struct nf_nat_range for IPv6; include/uapi/linux/netfilter/nf_nat.h).
// iptables-legacy's rules are not decoded (Source "iptables-legacy" of
// Read says when its nat table has rules).
const (
	natRangeProtoSpecified = 1 << 1 // NF_NAT_RANGE_PROTO_SPECIFIED
	natRangeRandom         = 1 << 2 // NF_NAT_RANGE_PROTO_RANDOM
	natRangeRandomFully    = 1 << 4 // NF_NAT_RANGE_PROTO_RANDOM_FULLY

	nftaMasqFlags    = 1 // NFTA_MASQ_FLAGS
	nftaMasqProtoMin = 2 // NFTA_MASQ_REG_PROTO_MIN
	nftaMasqProtoMax = 3 // NFTA_MASQ_REG_PROTO_MAX

	// DefaultMasqLo, DefaultMasqHi: the ports a MASQUERADE without a range
	// picks from when the source port must change (nf_nat_l4proto_unique_tuple,
	// a source port of 1024 or more): it keeps the connection's own port
	// when that is free toward the destination.
	DefaultMasqLo = 1024
	DefaultMasqHi = 65535
)

// Masquerade is one MASQUERADE rule.
type Masquerade struct {
	Mode        string // ModeNftables (nft's masquerade) or ModeIPTables (iptables-nft's -j MASQUERADE)
	Family      string // "ip", "ip6", "inet"
	Table       string
	Chain       string
	Lo, Hi      uint16 // the port range it was given; 0, 0: none (DefaultMasqLo-DefaultMasqHi)
	Random      bool   // --random / random
	RandomFully bool   // --random-fully / fully-random
}

// Ports is the rule's port range, the default when it has none.
func (m Masquerade) Ports() (lo, hi int) {
	if m.Hi == 0 {
		return DefaultMasqLo, DefaultMasqHi
	}
	return int(m.Lo), int(m.Hi)
}

// ReadMasquerade reads every MASQUERADE rule of the calling thread's netns.
func ReadMasquerade() ([]Masquerade, error) {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var out []Masquerade
	for _, fam := range []uint8{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6, unix.NFPROTO_INET} {
		err := nftRequest(c, unix.NFT_MSG_GETRULE, fam, unix.NLM_F_DUMP, nil, func(b []byte) error {
			m, ok, err := parseMasq(b)
			if ok {
				m.Family = map[uint8]string{unix.NFPROTO_IPV4: "ip", unix.NFPROTO_IPV6: "ip6", unix.NFPROTO_INET: "inet"}[fam]
				out = append(out, m)
			}
			return err
		})
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("nftables rules of family %d: %w", fam, err)
		}
	}
	return out, nil
}

// parseMasq decodes one NFT_MSG_NEWRULE reply; ok when the rule
// masquerades.
func parseMasq(b []byte) (Masquerade, bool, error) {
	var m Masquerade
	h, err := parseRuleHeader(b)
	if err != nil {
		return m, false, err
	}
	m.Table, m.Chain = h.table, h.chain
	regs := map[uint32][]byte{} // register -> value an immediate loaded
	found := false
	err = attrs(h.exprs, func(typ uint16, e []byte) {
		if typ != unix.NFTA_LIST_ELEM {
			return
		}
		name, a := exprAttrs(e)
		switch name {
		case "immediate":
			if d := a[unix.NFTA_IMMEDIATE_DREG]; len(d) == 4 {
				regs[binary.BigEndian.Uint32(d)] = dataValue(a[unix.NFTA_IMMEDIATE_DATA])
			}
		case "masq":
			found = true
			m.Mode = ModeNftables
			m.nftMasq(a, regs)
		case "target":
			if cstring(a[unix.NFTA_TARGET_NAME]) == "MASQUERADE" {
				found = true
				m.Mode = ModeIPTables
				m.xtMasq(a[unix.NFTA_TARGET_INFO])
			}
		}
	})
	return m, found, err
}

func (m *Masquerade) flags(f uint32) {
	m.Random = f&natRangeRandom != 0
	m.RandomFully = f&natRangeRandomFully != 0
}

// nftMasq: "masq" with its flags and the registers of its port range.
func (m *Masquerade) nftMasq(a map[uint16][]byte, regs map[uint32][]byte) {
	if f := a[nftaMasqFlags]; len(f) == 4 {
		m.flags(binary.BigEndian.Uint32(f))
	}
	port := func(attr uint16) uint16 {
		r := a[attr]
		if len(r) != 4 {
			return 0
		}
		if v := regs[binary.BigEndian.Uint32(r)]; len(v) >= 2 {
			return binary.BigEndian.Uint16(v)
		}
		return 0
	}
	m.Lo, m.Hi = port(nftaMasqProtoMin), port(nftaMasqProtoMax)
	if m.Hi == 0 {
		m.Hi = m.Lo // "to :40000": one port, the max register left out
	}
}

// xtMasq: the x_tables target's info. IPv4's nf_nat_ipv4_multi_range_compat
// (rangesize, then flags, min_ip, max_ip, min, max: 20 bytes) or IPv6's
// nf_nat_range (flags, min_addr, max_addr, min_proto, max_proto: 40 bytes);
// ports in network order, flags in host order.
func (m *Masquerade) xtMasq(info []byte) {
	ne := binary.NativeEndian
	var flags uint32
	var ports []byte
	switch {
	case len(info) >= 40:
		flags, ports = ne.Uint32(info[0:]), info[36:40]
	case len(info) >= 20:
		flags, ports = ne.Uint32(info[4:]), info[16:20]
	default:
		return
	}
	m.flags(flags)
	if flags&natRangeProtoSpecified != 0 {
		m.Lo, m.Hi = binary.BigEndian.Uint16(ports[0:]), binary.BigEndian.Uint16(ports[2:])
	}
}

// Narrowest is the narrowest of rules whose range holds the ports lo to
// hi (those NAT chose toward one destination: the rule that chose them).
func Narrowest(rules []Masquerade, lo, hi uint16) (Masquerade, bool) {
	best, found := Masquerade{}, false
	for _, m := range rules {
		l, h := m.Ports()
		if int(lo) < l || int(hi) > h {
			continue
		}
		if bl, bh := best.Ports(); !found || h-l < bh-bl {
			best, found = m, true
		}
	}
	return best, found
}
