package nodeport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The IPVS generic netlink family (include/uapi/linux/ip_vs.h). Not in
// golang.org/x/sys/unix.
const (
	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1

	ipvsCmdGetService = 4
	ipvsCmdGetDest    = 8

	ipvsCmdAttrService = 1
	ipvsCmdAttrDest    = 2

	ipvsSvcAttrAF       = 1 // u16
	ipvsSvcAttrProtocol = 2 // u16
	ipvsSvcAttrAddr     = 3 // union nf_inet_addr, 16 bytes
	ipvsSvcAttrPort     = 4 // be16
	ipvsSvcAttrFwmark   = 5 // u32

	ipvsDestAttrAddr       = 1  // union nf_inet_addr
	ipvsDestAttrPort       = 2  // be16
	ipvsDestAttrAddrFamily = 11 // u16, since 4.19; else the service's

	// maxDestDumps bounds the IPVS_CMD_GET_DEST requests of one Read: one
	// per service, and a node may have thousands.
	maxDestDumps = 512
)

// errNoIPVS is the error when the IPVS family is not registered.
var errNoIPVS = errors.New("module not loaded (no IPVS generic netlink family: ip_vs is not loaded, or not in this kernel)")

// ipvsService is one virtual service as the dump gives it.
type ipvsService struct {
	af      uint16
	proto   uint16
	addr    netip.Addr
	port    uint16
	fwmark  uint32
	raw     []byte // the nested IPVS_CMD_ATTR_SERVICE, to ask for its dests
	rawAddr []byte // IPVS_SVC_ATTR_ADDR, decoded once AF is known
}

// readIPVS dumps the virtual services (and the first real server of each)
// of the calling thread's netns. Firewall-mark services have no port and are
// counted as skipped.
func readIPVS() ([]Hit, int, error) {
	c, err := dial(unix.NETLINK_GENERIC)
	if err != nil {
		return nil, 0, err
	}
	defer c.close()
	fam, err := genlFamily(c, ipvsGenlName)
	if errors.Is(err, unix.ENOENT) {
		return nil, 0, errNoIPVS
	}
	if err != nil {
		return nil, 0, fmt.Errorf("resolve generic netlink family IPVS: %w", err)
	}
	var svcs []ipvsService
	skipped := 0
	err = c.request(fam, unix.NLM_F_DUMP, genlHeader(ipvsCmdGetService), func(p []byte) error {
		// a service this reader does not understand is counted, not
		// guessed, and does not hide the others
		if s, err := parseIPVSMessage(p); err == nil {
			svcs = append(svcs, s)
		} else {
			skipped++
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("IPVS_CMD_GET_SERVICE dump: %w", err)
	}
	var hits []Hit
	for i, s := range svcs {
		if s.fwmark != 0 || s.port == 0 {
			skipped++
			continue
		}
		h := Hit{Mode: ModeIPVS, Proto: uint8(s.proto), Port: s.port, Addr: s.addr}
		if i < maxDestDumps {
			h.Backend = firstDest(c, fam, s)
		}
		hits = append(hits, h)
	}
	return hits, skipped, nil
}

// genlHeader is a generic netlink header for cmd.
func genlHeader(cmd uint8) []byte {
	return []byte{cmd, ipvsGenlVersion, 0, 0}
}

// genlFamily resolves a generic netlink family name to its id
// (CTRL_CMD_GETFAMILY); unix.ENOENT when it is not registered.
func genlFamily(c *conn, name string) (uint16, error) {
	body := putString([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, unix.CTRL_ATTR_FAMILY_NAME, name)
	var id uint16
	err := c.request(unix.GENL_ID_CTRL, unix.NLM_F_ACK, body, func(p []byte) error {
		if len(p) < unix.GENL_HDRLEN {
			return fmt.Errorf("short generic netlink message (%d bytes)", len(p))
		}
		return attrs(p[unix.GENL_HDRLEN:], func(typ uint16, data []byte) {
			if typ == unix.CTRL_ATTR_FAMILY_ID && len(data) >= 2 {
				id = binary.NativeEndian.Uint16(data)
			}
		})
	})
	if err == nil && id == 0 {
		err = fmt.Errorf("no CTRL_ATTR_FAMILY_ID for %s", name)
	}
	return id, err
}

// parseIPVSMessage reads the service of one IPVS_CMD_NEW_SERVICE reply.
func parseIPVSMessage(p []byte) (ipvsService, error) {
	var s ipvsService
	if len(p) < unix.GENL_HDRLEN {
		return s, fmt.Errorf("short generic netlink message (%d bytes)", len(p))
	}
	var inner error
	err := attrs(p[unix.GENL_HDRLEN:], func(typ uint16, data []byte) {
		if typ == ipvsCmdAttrService {
			// a copy: data is in the receive buffer, which the next
			// datagram (and the dest dumps) overwrite
			s.raw = append([]byte(nil), data...)
			inner = attrs(data, s.set)
		}
	})
	if err = errors.Join(err, inner); err != nil {
		return s, err
	}
	if s.raw == nil {
		return s, errors.New("IPVS reply without IPVS_CMD_ATTR_SERVICE")
	}
	s.addr = inetAddr(s.af, s.rawAddr)
	if s.fwmark == 0 && !s.addr.IsValid() {
		return s, fmt.Errorf("IPVS service of address family %d: address not understood", s.af)
	}
	return s, nil
}

// set stores one attribute of a service.
func (s *ipvsService) set(typ uint16, data []byte) {
	ne := binary.NativeEndian
	switch {
	case typ == ipvsSvcAttrAF && len(data) >= 2:
		s.af = ne.Uint16(data)
	case typ == ipvsSvcAttrProtocol && len(data) >= 2:
		s.proto = ne.Uint16(data)
	case typ == ipvsSvcAttrPort && len(data) >= 2:
		s.port = binary.BigEndian.Uint16(data)
	case typ == ipvsSvcAttrFwmark && len(data) >= 4:
		s.fwmark = ne.Uint32(data)
	case typ == ipvsSvcAttrAddr:
		s.rawAddr = data
	}
}

// inetAddr decodes a union nf_inet_addr of family af.
func inetAddr(af uint16, data []byte) netip.Addr {
	switch {
	case af == unix.AF_INET && len(data) >= 4:
		return netip.AddrFrom4([4]byte(data[:4]))
	case af == unix.AF_INET6 && len(data) >= 16:
		return netip.AddrFrom16([16]byte(data[:16]))
	}
	return netip.Addr{}
}
