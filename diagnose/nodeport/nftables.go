package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// kube-proxy's nftables mode (pkg/proxy/nftables/proxier.go): table
// kube-proxy in families ip and ip6, the maps of NodePort traffic, typed
// "inet_proto . inet_service : verdict".
const (
	kubeProxyTable     = "kube-proxy"
	serviceNodePorts   = "service-nodeports"     // tcp . 30080 : goto external-HASH-ns/svc/tcp/port
	noEndpointNodePort = "no-endpoint-nodeports" // tcp . 30080 comment "ns/svc:port" : drop (or goto reject-chain)

	// keyLen is the key of inet_proto . inet_service: each part of a
	// concatenation takes a 32-bit register (proto, 3 bytes of padding, the
	// port in network order, 2 bytes of padding).
	keyLen = 8

	udataSetElemComment = 0 // NFTNL_UDATA_SET_ELEM_COMMENT (libnftnl udata.h)
)

// families are the nftables families kube-proxy and iptables-nft write.
var families = []uint8{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6}

// readNftables reads both maps of table kube-proxy in families ip and ip6. A
// table or map that is not there is no error: kube-proxy is not in that
// mode (or that family) on this node.
func readNftables() ([]Hit, int, error) {
	c, err := dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, 0, err
	}
	defer c.close()
	var hits []Hit
	skipped := 0
	for _, fam := range families {
		for _, set := range []string{serviceNodePorts, noEndpointNodePort} {
			h, s, err := dumpElements(c, fam, kubeProxyTable, set)
			if err != nil {
				return nil, 0, fmt.Errorf("table %s %s map %s: %w", famName(fam), kubeProxyTable, set, err)
			}
			hits, skipped = append(hits, h...), skipped+s
		}
	}
	return hits, skipped, nil
}

// nftRequest sends one nf_tables request of message msg for family fam
// and calls each with the attributes of every reply (after nfgenmsg).
func nftRequest(c *conn, msg uint16, fam uint8, flags uint16, attrsIn []byte, each func(b []byte) error) error {
	body := append([]byte{fam, unix.NFNETLINK_V0, 0, 0}, attrsIn...)
	return c.request(unix.NFNL_SUBSYS_NFTABLES<<8|msg, flags, body, func(p []byte) error {
		if len(p) < 4 {
			return fmt.Errorf("short nfnetlink message (%d bytes)", len(p))
		}
		return each(p[4:])
	})
}

// dumpElements dumps the elements of one map (NFT_MSG_GETSETELEM).
func dumpElements(c *conn, fam uint8, table, set string) ([]Hit, int, error) {
	req := putString(nil, unix.NFTA_SET_ELEM_LIST_TABLE, table)
	req = putString(req, unix.NFTA_SET_ELEM_LIST_SET, set)
	var hits []Hit
	skipped := 0
	err := nftRequest(c, unix.NFT_MSG_GETSETELEM, fam, unix.NLM_F_DUMP, req, func(b []byte) error {
		var inner error
		err := attrs(b, func(typ uint16, data []byte) {
			if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				return
			}
			inner = attrs(data, func(typ uint16, elem []byte) {
				if typ != unix.NFTA_LIST_ELEM {
					return
				}
				if h, ok := parseElement(elem); ok {
					hits = append(hits, h)
				} else {
					skipped++
				}
			})
		})
		return errors.Join(err, inner)
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, 0, nil // no such table or map
	}
	return hits, skipped, err
}

// parseElement decodes one element "proto . port : verdict [comment]".
func parseElement(b []byte) (Hit, bool) {
	h := Hit{Mode: ModeNftables}
	var key []byte
	var comment string
	attrs(b, func(typ uint16, data []byte) {
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			key = dataValue(data)
		case unix.NFTA_SET_ELEM_DATA:
			h.Verdict = verdict(data)
		case unix.NFTA_SET_ELEM_USERDATA:
			comment = udataString(data, udataSetElemComment)
		}
	})
	if len(key) != keyLen {
		return h, false
	}
	h.Proto, h.Port = key[0], binary.BigEndian.Uint16(key[4:6])
	h.Service = comment
	if h.Service == "" {
		h.Service = serviceFromChain(strings.TrimPrefix(strings.TrimPrefix(h.Verdict, "goto "), "jump "))
	}
	return h, h.Port != 0
}

// dataValue is the NFTA_DATA_VALUE of a nested nft_data.
func dataValue(b []byte) []byte {
	var v []byte
	attrs(b, func(typ uint16, data []byte) {
		if typ == unix.NFTA_DATA_VALUE {
			v = data
		}
	})
	return v
}

// verdict decodes a nested nft_data holding NFTA_DATA_VERDICT: "goto
// CHAIN", "jump CHAIN", "drop", "accept", "return", "unknown:N".
func verdict(b []byte) string {
	out := ""
	attrs(b, func(typ uint16, data []byte) {
		if typ != unix.NFTA_DATA_VERDICT {
			return
		}
		code, chain := int32(0), ""
		attrs(data, func(typ uint16, d []byte) {
			switch {
			case typ == unix.NFTA_VERDICT_CODE && len(d) >= 4:
				code = int32(binary.BigEndian.Uint32(d))
			case typ == unix.NFTA_VERDICT_CHAIN:
				chain = cstring(d)
			}
		})
		out = verdictName(code, chain)
	})
	return out
}

func verdictName(code int32, chain string) string {
	switch code {
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_RETURN:
		return "return"
	case 0: // NF_DROP
		return "drop"
	case 1: // NF_ACCEPT
		return "accept"
	}
	return fmt.Sprintf("unknown:%d", code)
}

// udataString finds the string TLV of type want in nftnl user data (type
// u8, length u8, value).
func udataString(b []byte, want uint8) string {
	for len(b) >= 2 {
		typ, l := b[0], int(b[1])
		if 2+l > len(b) {
			return ""
		}
		if typ == want {
			return cstring(b[2 : 2+l])
		}
		b = b[2+l:]
	}
	return ""
}

func famName(fam uint8) string {
	if fam == unix.NFPROTO_IPV6 {
		return "ip6"
	}
	return "ip"
}
