// Package nodeport reads the node's NodePort rules, the rules kube-proxy
// writes so that a packet to <node address>:<NodePort> goes to a Service's
// backends, from the kernel of the calling thread's network namespace.
//
// The diagnosis needs them for one failure: a connect() that timed out
// because the kernel picked a source port that is also a NodePort, so the
// reply (to <node address>:<that port>) was caught by kube-proxy's rule and
// never reached the socket. Find names the rule the reply hit.
//
// Everything is read over netlink (golang.org/x/sys/unix only, no iptables,
// nft or ipvsadm binary): eaddr runs in a minimal container. Three
// kube-proxy modes are read, each on its own, and a mode that cannot be read
// says why in Table.Sources instead of being guessed:
//
//   - ipvs: the virtual services of the IPVS generic netlink family
//     (IPVS_CMD_GET_SERVICE dump), and their real servers;
//   - nftables: table ip/ip6 kube-proxy, maps service-nodeports
//     ("tcp . 30080 : goto external-HASH-ns/svc/tcp/port") and
//     no-endpoint-nodeports (elements commented "ns/svc:port");
//   - iptables: iptables-nft's table ip/ip6 nat, chain KUBE-NODEPORTS, whose
//     rules are nftables rules with the xt "comment" match and a native (or
//     xt "tcp"/"udp") destination port match. iptables-legacy's x_tables
//     rules (getsockopt IPT_SO_GET_ENTRIES) are not decoded: when the legacy
//     nat table of the netns holds rules, source "iptables-legacy" says so.
//
// Read must run on a thread inside the node's network namespace (the caller
// uses internal/netns's Do): every netlink socket is opened on that thread.
package nodeport

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Modes, as in Hit.Mode and Source.Name.
const (
	ModeIPVS     = "ipvs"
	ModeNftables = "nftables"
	ModeIPTables = "iptables"
	// SourceLegacy is the Source that reports iptables-legacy's x_tables
	// rules, which are not decoded.
	SourceLegacy = "iptables-legacy"
)

// Hit is one NodePort rule that catches packets to a port.
type Hit struct {
	Mode    string // ModeIPVS, ModeNftables or ModeIPTables
	Service string // "default/web:http" from kube-proxy's comments or chain names; "" when the rule does not say
	Port    uint16 // the port matched (the NodePort)
	Proto   uint8  // unix.IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP
	// Addr is the virtual address of an IPVS service (IPVS matches address
	// and port); invalid for nftables and iptables rules, which match the
	// port on any local address.
	Addr netip.Addr
	// Backend is "addr:port" of the first real server of an IPVS service,
	// or "" (never read for nftables and iptables: the rule only jumps to a
	// chain).
	Backend string
	// Verdict says what the rule does: "goto CHAIN", "jump CHAIN", "drop",
	// "accept", "" for IPVS.
	Verdict string
}

// Source is what Read got from one of the places it reads.
type Source struct {
	Name    string // ModeIPVS, ModeNftables, ModeIPTables or SourceLegacy
	Entries int    // NodePort entries read; 0 with a nil Err: read, nothing there
	// Skipped counts entries that were there but not understood (e.g. an
	// iptables rule in KUBE-NODEPORTS with no single port): never guessed.
	Skipped int
	Err     error // why this source could not be read (fully); nil when it was
}

// Table is the NodePort rules of one network namespace.
type Table struct {
	Sources []Source
	hits    map[key][]Hit
}

type key struct {
	proto uint8
	port  uint16
}

// Read reads the NodePort rules of every mode from the calling thread's
// network namespace. It returns an error only when no source could be read
// at all (ipvs, nftables and iptables all failed: the iptables-legacy check
// alone does not count); a source that failed has its Err set in
// Table.Sources.
func Read() (*Table, error) {
	t := &Table{hits: map[key][]Hit{}}
	t.Sources = append(t.Sources, t.collect(ModeIPVS, readIPVS))
	t.Sources = append(t.Sources, t.collect(ModeNftables, readNftables))
	t.Sources = append(t.Sources, t.collect(ModeIPTables, readIPTablesNft))
	t.Sources = append(t.Sources, readLegacy())
	var errs []error
	for _, s := range t.Sources[:3] {
		if s.Err == nil {
			return t, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.Name, s.Err))
	}
	return nil, fmt.Errorf("nodeport: no NodePort rules could be read: %w", errors.Join(errs...))
}

// collect runs one reader and adds its hits.
func (t *Table) collect(name string, read func() ([]Hit, int, error)) Source {
	hits, skipped, err := read()
	for _, h := range hits {
		k := key{h.Proto, h.Port}
		t.hits[k] = append(t.hits[k], h)
	}
	return Source{Name: name, Entries: len(hits), Skipped: skipped, Err: err}
}

// Find returns a rule that catches packets of proto (unix.IPPROTO_TCP, ...)
// to port: an nftables or iptables NodePort rule, else an IPVS service on
// that port at any address (use FindAddr when the reply's destination
// address is known: IPVS matches the address too).
func (t *Table) Find(proto uint8, port uint16) (Hit, bool) {
	return t.find(proto, netip.Addr{}, port)
}

// FindAddr is Find for a packet to addr: an IPVS service matches only when
// its virtual address is addr.
func (t *Table) FindAddr(proto uint8, addr netip.Addr, port uint16) (Hit, bool) {
	return t.find(proto, addr.Unmap(), port)
}

func (t *Table) find(proto uint8, addr netip.Addr, port uint16) (Hit, bool) {
	if t == nil {
		return Hit{}, false
	}
	hits := t.hits[key{proto, port}]
	for _, h := range hits {
		if h.Mode != ModeIPVS {
			return h, true
		}
	}
	for _, h := range hits {
		if !addr.IsValid() || h.Addr == addr {
			return h, true
		}
	}
	return Hit{}, false
}

// String sums the table up: "ipvs: 2, nftables: 0, iptables: error: ...".
func (t *Table) String() string {
	var b strings.Builder
	for i, s := range t.Sources {
		if i > 0 {
			b.WriteString(", ")
		}
		if s.Err != nil {
			fmt.Fprintf(&b, "%s: error: %v", s.Name, s.Err)
			continue
		}
		fmt.Fprintf(&b, "%s: %d", s.Name, s.Entries)
		if s.Skipped > 0 {
			fmt.Fprintf(&b, " (%d not understood)", s.Skipped)
		}
	}
	return b.String()
}
