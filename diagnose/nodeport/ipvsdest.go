package nodeport

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// firstDest returns "addr:port" of the first real server of s
// (IPVS_CMD_GET_DEST dump of that service), or "" when it has none or they
// cannot be read: the backend is a detail, never worth failing the read.
func firstDest(c *conn, fam uint16, s ipvsService) string {
	body := putAttr(genlHeader(ipvsCmdGetDest), ipvsCmdAttrService|nlaNested, s.raw)
	first := ""
	err := c.request(fam, unix.NLM_F_DUMP, body, func(p []byte) error {
		if first != "" || len(p) < unix.GENL_HDRLEN {
			return nil
		}
		return attrs(p[unix.GENL_HDRLEN:], func(typ uint16, data []byte) {
			if typ == ipvsCmdAttrDest && first == "" {
				first = parseDest(s.af, data)
			}
		})
	})
	if err != nil {
		return ""
	}
	return first
}

// parseDest decodes a nested IPVS_CMD_ATTR_DEST as "addr:port".
func parseDest(af uint16, b []byte) string {
	var raw []byte
	var port uint16
	attrs(b, func(typ uint16, data []byte) {
		switch {
		case typ == ipvsDestAttrAddr:
			raw = data
		case typ == ipvsDestAttrPort && len(data) >= 2:
			port = binary.BigEndian.Uint16(data)
		case typ == ipvsDestAttrAddrFamily && len(data) >= 2:
			af = binary.NativeEndian.Uint16(data)
		}
	})
	a := inetAddr(af, raw)
	if !a.IsValid() {
		return ""
	}
	return netip.AddrPortFrom(a, port).String()
}
