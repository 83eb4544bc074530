package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// kube-proxy's iptables mode through iptables-nft: table nat (families ip
// and ip6), chain KUBE-NODEPORTS, one rule per NodePort, e.g.
//
//	-A KUBE-NODEPORTS -m comment --comment "default/web:http" -m tcp -p tcp --dport 30080 -j KUBE-EXT-...
//
// which iptables-nft 1.8.9 writes as nftables expressions
//
//	meta load l4proto => reg 1; cmp eq reg 1 6
//	match name comment (xt_comment_info, through nft_compat)
//	payload load 2b @ transport header + 2 => reg 1; cmp eq reg 1 30080
//	counter; immediate reg 0 jump -> KUBE-EXT-...
//
// The port match may also come as an xt "tcp"/"udp" match (other
// iptables-nft versions), and the comment as rule user data; both are read.
// A rule whose protocol and single destination port cannot be read this way
// (an inverted or ranged match, an expression this reader does not know in a
// place that matters) is counted as skipped, not guessed.
const (
	iptNatTable  = "nat"
	iptNodePorts = "KUBE-NODEPORTS"

	udataRuleComment = 0 // NFTNL_UDATA_RULE_COMMENT

	xtCommentLen = 256  // XT_MAX_COMMENT_LEN: struct xt_comment_info
	xtInvDst     = 0x02 // XT_TCP_INV_DSTPT, XT_UDP_INV_DSTPT
)

// readIPTablesNft reads chain KUBE-NODEPORTS of table nat, families ip
// and ip6.
func readIPTablesNft() ([]Hit, int, error) {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, 0, err
	}
	defer c.close()
	var hits []Hit
	skipped := 0
	for _, fam := range families {
		req := putString(nil, unix.NFTA_RULE_TABLE, iptNatTable)
		req = putString(req, unix.NFTA_RULE_CHAIN, iptNodePorts)
		err := nftRequest(c, unix.NFT_MSG_GETRULE, fam, unix.NLM_F_DUMP, req, func(b []byte) error {
			r, err := parseRule(b)
			switch {
			case err != nil:
				return err
			case r.table != iptNatTable || r.chain != iptNodePorts:
				// an older kernel that ignores the dump's filter
			case r.ok:
				hits = append(hits, r.hit)
			default:
				skipped++
			}
			return nil
		})
		if errors.Is(err, unix.ENOENT) {
			continue // no table nat or no chain KUBE-NODEPORTS in this family
		}
		if err != nil {
			return nil, 0, fmt.Errorf("table %s %s chain %s: %w", famName(fam), iptNatTable, iptNodePorts, err)
		}
	}
	return hits, skipped, nil
}

// rule is one decoded rule of KUBE-NODEPORTS.
type rule struct {
	table, chain string
	hit          Hit
	ok           bool // hit has a protocol and a port
}

// parseRule decodes one NFT_MSG_NEWRULE reply.
func parseRule(b []byte) (rule, error) {
	var r rule
	h, err := parseRuleHeader(b)
	if err != nil {
		return r, err
	}
	r.table, r.chain = h.table, h.chain
	m := matcher{hit: Hit{Mode: ModeIPTables}}
	err = attrs(h.exprs, func(typ uint16, e []byte) {
		if typ == unix.NFTA_LIST_ELEM {
			m.expr(e)
		}
	})
	if err != nil {
		return r, err
	}
	r.hit = m.hit
	if r.hit.Service == "" {
		r.hit.Service = h.comment
	}
	r.ok = !m.bad && r.hit.Proto != 0 && r.hit.Port != 0
	return r, nil
}

// matcher follows a rule's expressions: which register holds the layer 4
// protocol or the destination port, and what the comparisons want of them.
type matcher struct {
	hit  Hit
	regs map[uint32]string // register -> "l4proto" | "dport" | "ports" (source and destination port)
	bad  bool              // a match on protocol or port this reader cannot take as one port
}

// expr takes one NFTA_LIST_ELEM of the rule's expressions.
func (m *matcher) expr(b []byte) {
	name, a := exprAttrs(b)
	if m.regs == nil {
		m.regs = map[uint32]string{}
	}
	u32 := func(d []byte) uint32 { return binary.BigEndian.Uint32(d) }
	switch name {
	case "meta":
		if d, k := a[unix.NFTA_META_DREG], a[unix.NFTA_META_KEY]; len(d) == 4 && len(k) == 4 {
			m.load(u32(d), u32(k) == unix.NFT_META_L4PROTO, "l4proto")
		}
	case "payload":
		d, base, off, l := a[unix.NFTA_PAYLOAD_DREG], a[unix.NFTA_PAYLOAD_BASE], a[unix.NFTA_PAYLOAD_OFFSET], a[unix.NFTA_PAYLOAD_LEN]
		if len(d) == 4 && len(base) == 4 && len(off) == 4 && len(l) == 4 {
			th := u32(base) == unix.NFT_PAYLOAD_TRANSPORT_HEADER
			switch {
			case th && u32(off) == 2 && u32(l) == 2:
				m.load(u32(d), true, "dport")
			case th && u32(off) == 0 && u32(l) == 4: // --sport and --dport together
				m.load(u32(d), true, "ports")
			default:
				m.load(u32(d), false, "")
			}
		}
	case "cmp":
		if s, op := a[unix.NFTA_CMP_SREG], a[unix.NFTA_CMP_OP]; len(s) == 4 && len(op) == 4 {
			m.cmp(m.regs[u32(s)], u32(op), dataValue(a[unix.NFTA_CMP_DATA]))
		}
	case "match":
		m.xtMatch(cstring(a[unix.NFTA_MATCH_NAME]), a[unix.NFTA_MATCH_INFO])
	case "immediate":
		if v := verdict(a[unix.NFTA_IMMEDIATE_DATA]); v != "" {
			m.hit.Verdict = v
		}
	case "target":
		m.hit.Verdict = "target " + cstring(a[unix.NFTA_TARGET_NAME])
	case "range", "lookup":
		// a port range or set: not one port; harmless if on another register
		if s := a[unix.NFTA_RANGE_SREG]; name == "range" && len(s) == 4 && m.regs[u32(s)] != "" {
			m.bad = true
		}
		if s := a[unix.NFTA_LOOKUP_SREG]; name == "lookup" && len(s) == 4 && m.regs[u32(s)] != "" {
			m.bad = true
		}
	}
}

// load records what a register now holds ("" for anything else).
func (m *matcher) load(reg uint32, is bool, what string) {
	if is {
		m.regs[reg] = what
	} else {
		delete(m.regs, reg)
	}
}

// cmp takes a comparison of a register holding what.
func (m *matcher) cmp(what string, op uint32, v []byte) {
	if what == "" {
		return // a match on something else (an address, a mark, ...)
	}
	if op != unix.NFT_CMP_EQ {
		m.bad = true
		return
	}
	switch {
	case what == "l4proto" && len(v) >= 1:
		m.hit.Proto = v[0]
	case what == "dport" && len(v) >= 2:
		m.hit.Port = binary.BigEndian.Uint16(v)
	case what == "ports" && len(v) >= 4:
		m.hit.Port = binary.BigEndian.Uint16(v[2:])
	default:
		m.bad = true
	}
}

// xtMatch takes an x_tables match run through nft_compat.
func (m *matcher) xtMatch(name string, info []byte) {
	ne := binary.NativeEndian
	switch name {
	case "comment":
		if len(info) > xtCommentLen {
			info = info[:xtCommentLen]
		}
		m.hit.Service = cstring(info)
	case "tcp", "udp":
		// struct xt_tcp { __u16 spts[2], dpts[2]; __u8 option, flg_opts, invflags; }
		// struct xt_udp { __u16 spts[2], dpts[2]; __u8 invflags; }: ports in host order
		inv := 10
		if name == "udp" {
			inv = 8
		}
		if len(info) <= inv {
			m.bad = true
			return
		}
		lo, hi := ne.Uint16(info[4:]), ne.Uint16(info[6:])
		if lo == 0 && hi == 0xffff {
			return // no --dport: any port
		}
		if lo != hi || info[inv]&xtInvDst != 0 {
			m.bad = true
			return
		}
		m.hit.Port = lo
		m.hit.Proto = unix.IPPROTO_TCP
		if name == "udp" {
			m.hit.Proto = unix.IPPROTO_UDP
		}
	}
}

// ruleHeader is what a rule says of itself: where it is, its comment (rule
// user data), and its expressions, undecoded.
type ruleHeader struct {
	table, chain, comment string
	exprs                 []byte
}

func parseRuleHeader(b []byte) (ruleHeader, error) {
	var h ruleHeader
	err := attrs(b, func(typ uint16, data []byte) {
		switch typ {
		case unix.NFTA_RULE_TABLE:
			h.table = cstring(data)
		case unix.NFTA_RULE_CHAIN:
			h.chain = cstring(data)
		case unix.NFTA_RULE_EXPRESSIONS:
			h.exprs = data
		case unix.NFTA_RULE_USERDATA:
			h.comment = udataString(data, udataRuleComment)
		}
	})
	return h, err
}

// exprAttrs is an expression's name and its attributes by type.
func exprAttrs(b []byte) (string, map[uint16][]byte) {
	name, data := "", []byte(nil)
	attrs(b, func(typ uint16, d []byte) {
		switch typ {
		case unix.NFTA_EXPR_NAME:
			name = cstring(d)
		case unix.NFTA_EXPR_DATA:
			data = d
		}
	})
	a := map[uint16][]byte{}
	attrs(data, func(typ uint16, d []byte) { a[typ] = d })
	return name, a
}
