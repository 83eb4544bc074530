package netdiag

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// IfAddr is one address of the netns with the flags the kernel keeps for
// it: a tentative address (IPv6 duplicate address detection still running)
// or one whose detection failed cannot be bound yet, though `ip addr` lists it.
type IfAddr struct {
	Prefix netip.Prefix
	Index  int    // interface index
	Flags  uint32 // IFA_F_* (IFA_FLAGS when present, else ifa_flags)
}

// Usable reports whether bind() to the address can succeed now.
func (a IfAddr) Usable() bool {
	return a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0
}

// FlagNames are the address's flags that matter to bind(), as `ip addr`
// prints them: "tentative", "dadfailed", "deprecated".
func (a IfAddr) FlagNames() string {
	var out []string
	for _, f := range []struct {
		bit  uint32
		name string
	}{{unix.IFA_F_TENTATIVE, "tentative"}, {unix.IFA_F_DADFAILED, "dadfailed"}, {unix.IFA_F_DEPRECATED, "deprecated"}} {
		if a.Flags&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return strings.Join(out, " ")
}

// IfAddrs lists the addresses of the netns with their flags, read over
// NETLINK_ROUTE (RTM_GETADDR) from a thread inside it.
func (n *Netns) IfAddrs() ([]IfAddr, error) {
	var out []IfAddr
	err := n.ns.Do(func() error {
		var err error
		out, err = readIfAddrs()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netdiag: addresses of %s: %w", nsLink(n.inode), err)
	}
	return out, nil
}

func readIfAddrs() ([]IfAddr, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	var out []IfAddr
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		if a, ok := parseIfAddr(&m); ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// parseIfAddr reads one RTM_NEWADDR: IFA_LOCAL is the address itself on
// point-to-point links, IFA_ADDRESS otherwise.
func parseIfAddr(m *syscall.NetlinkMessage) (IfAddr, bool) {
	hdr := m.Data[:syscall.SizeofIfAddrmsg]
	a := IfAddr{Index: int(binary.NativeEndian.Uint32(hdr[4:8])), Flags: uint32(hdr[2])}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return a, false
	}
	var addr, local netip.Addr
	for _, at := range attrs {
		switch at.Attr.Type {
		case syscall.IFA_ADDRESS:
			addr, _ = netip.AddrFromSlice(at.Value)
		case syscall.IFA_LOCAL:
			local, _ = netip.AddrFromSlice(at.Value)
		case unix.IFA_FLAGS:
			if len(at.Value) >= 4 {
				a.Flags = binary.NativeEndian.Uint32(at.Value)
			}
		}
	}
	if local.IsValid() {
		addr = local
	}
	if !addr.IsValid() {
		return a, false
	}
	a.Prefix = netip.PrefixFrom(addr.Unmap(), int(hdr[1]))
	return a, true
}
