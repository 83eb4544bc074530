package nodeport

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// SNATKey is where the node's SNAT ports run out: one protocol, one egress
// address (the node's, that MASQUERADE wrote as the source) and one
// destination (after any DNAT: the reply tuple's source). Every entry
// toward it needs a source port of its own.
type SNATKey struct {
	Proto  uint8
	Egress netip.Addr
	Dst    netip.AddrPort
}

// SNATSource is one original source (a pod's address) of a key's entries.
type SNATSource struct {
	SNATKey
	Src netip.Addr
}

// SNATCount is the conntrack table summed as it was read, never held.
type SNATCount struct {
	Entries int             // every entry read
	SNAT    int             // of those, source-NATed
	ByKey   map[SNATKey]int // SNAT entries per key, for the first maxKeys keys
	// Ports is the lowest and highest port NAT chose toward each key: the
	// MASQUERADE range that chose them has both.
	Ports    map[SNATKey][2]uint16
	BySource map[SNATSource]int // per key and original source, for the first maxKeys pairs
	Dropped  int                // SNAT entries whose key or pair found no room (past maxKeys)
}

// CountSNAT walks the conntrack table of the calling thread's netns, both
// families, and counts its source-NATed entries per SNATKey and per key
// and original source, at most maxKeys of each (the rest counted in
// Dropped). keep, when not nil, chooses the keys counted.
func CountSNAT(maxKeys int, keep func(SNATKey) bool) (*SNATCount, error) {
	s := &SNATCount{ByKey: map[SNATKey]int{}, BySource: map[SNATSource]int{}, Ports: map[SNATKey][2]uint16{}}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := DumpConntrack(fam, s.add(maxKeys, keep)); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *SNATCount) add(maxKeys int, keep func(SNATKey) bool) func(*CTEntry) {
	return func(e *CTEntry) {
		s.Entries++
		if e.Status&IPSSrcNAT == 0 {
			return
		}
		s.SNAT++
		k := SNATKey{Proto: e.Proto, Egress: e.Reply.Dst, Dst: netip.AddrPortFrom(e.Reply.Src, e.Reply.SrcPort)}
		if keep != nil && !keep(k) {
			return
		}
		if _, ok := s.ByKey[k]; !ok && len(s.ByKey) >= maxKeys {
			s.Dropped++
			return
		}
		s.ByKey[k]++
		p, port := s.Ports[k], e.Reply.DstPort
		if p[1] == 0 || port < p[0] {
			p[0] = port
		}
		p[1] = max(p[1], port)
		s.Ports[k] = p
		src := SNATSource{SNATKey: k, Src: e.Orig.Src}
		if _, ok := s.BySource[src]; ok || len(s.BySource) < maxKeys {
			s.BySource[src]++
		}
	}
}
