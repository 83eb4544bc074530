package diagnose

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// snatHoldersMax is how many holders a diagnosis names.
const snatHoldersMax = 8

// readNodeState reads, in the netns that dropped f's SYNs, its conntrack
// table's use and, for an SNAT drop, the entries holding that SNAT's ports
// toward the destination and the MASQUERADE rule that chose the port.
func (d *Diagnoser) readNodeState(f FlowDrops, n *NodeLayer) {
	ns, err := netdiag.OpenNetns(uint64(f.First.NetNS))
	if err != nil {
		if f.First.SrcNAT {
			n.SNAT = &SNATUse{Err: fmt.Sprintf("network namespace %d: %v", f.First.NetNS, err)}
		}
		return
	}
	defer ns.Close()
	var snat *SNATUse
	if f.First.SrcNAT {
		snat = &SNATUse{Egress: f.First.Reply.Dst, Dst: f.First.Reply.Src}
	}
	ns.Do(func() error {
		if c, max, err := nodeport.ConntrackUse(); err == nil {
			n.Conntrack = &ConntrackUse{Count: c, Max: max}
		}
		if snat != nil {
			readSNAT(snat, f.First.Reply.Proto)
		}
		return nil
	})
	if snat != nil {
		d.namePods(snat)
		n.SNAT = snat
	}
}

// readSNAT counts the entries toward s.Dst from s.Egress's address, by
// original source, and finds the MASQUERADE rule that chose s.Egress's port.
func readSNAT(s *SNATUse, proto uint8) {
	key := nodeport.SNATKey{Proto: proto, Egress: s.Egress.Addr(), Dst: s.Dst}
	c, err := nodeport.CountSNAT(snatHoldersMax*64, func(k nodeport.SNATKey) bool { return k == key })
	if err != nil {
		s.Err = err.Error() + needNetAdmin(err)
	} else {
		s.Entries = c.ByKey[key]
		for src, n := range c.BySource {
			s.Holders = append(s.Holders, SNATHolder{Addr: src.Src, Entries: n})
		}
		s.Holders = sortHolders(s.Holders)
	}
	rules, err := nodeport.ReadMasquerade()
	if err != nil {
		s.Err = joinErr(s.Err, "MASQUERADE rules: "+err.Error()+needNetAdmin(err))
		return
	}
	if m, ok := nodeport.Narrowest(rules, s.Egress.Port(), s.Egress.Port()); ok {
		s.Lo, s.Hi = m.Ports()
		s.Rule = masqName(m)
		s.RandomFully = m.RandomFully
	}
}

func ruleTool(m nodeport.Masquerade) string {
	if m.Mode == nodeport.ModeIPTables {
		return "iptables-nft"
	}
	return "nft"
}

// sortHolders sorts hs by entries, most first (ties by address: the same
// order every read).
func sortHolders(hs []SNATHolder) []SNATHolder {
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i], hs[j]
		return a.Entries > b.Entries || a.Entries == b.Entries && a.Addr.Less(b.Addr)
	})
	return hs
}

// namePods names the holders' pods by address (the runtime's list); the
// first snatHoldersMax holders are kept.
func (d *Diagnoser) namePods(s *SNATUse) {
	if len(s.Holders) > snatHoldersMax {
		s.Holders = s.Holders[:snatHoldersMax]
	}
	if d.Pods != nil {
		nameHolders(s.Holders, d.Pods.PodByIP)
	}
}

// nameHolders names each holder's pod by its address with podOf (nil: not
// named); a pod whose name is not known is left out, not guessed.
func nameHolders(hs []SNATHolder, podOf func(netip.Addr) (*decode.Pod, bool)) {
	if podOf == nil {
		return
	}
	for i := range hs {
		if p, ok := podOf(hs[i].Addr); ok && p.Name != "" {
			hs[i].Pod = p
		}
	}
}

// needNetAdmin says why netlink refused eaddr, when it did.
func needNetAdmin(err error) string {
	if errors.Is(err, unix.EPERM) {
		return " (the kernel allows conntrack's table and the nftables rules to CAP_NET_ADMIN alone: docs/kubernetes.md)"
	}
	return ""
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// holdersText: "10.98.1.2 (pod default/web) 4, 10.98.2.2 1".
func holdersText(hs []SNATHolder) string {
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += ", "
		}
		s += h.Addr.String()
		if h.Pod != nil {
			s += " (pod " + h.Pod.Namespace + "/" + h.Pod.Name + ")"
		}
		s += fmt.Sprintf(" %d", h.Entries)
	}
	return s
}
