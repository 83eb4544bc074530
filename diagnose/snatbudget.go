package diagnose

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
)

// The node's SNAT budget before a failure (issue 37): per egress address
// and destination, the conntrack entries whose MASQUERADE holds one of its
// ports, against the range of the rule that chose them, and each pod's
// share. The trace's sampler exports them (pipeline/nodebudget.go: the
// metrics, the Warning Event on the pod holding the most); eaddr top shows
// the same rows.

// SNATBudget is the node's SNAT from one egress address toward one
// destination (after any DNAT).
type SNATBudget struct {
	Proto   uint8 // unix.IPPROTO_TCP, _UDP, ...
	Egress  netip.Addr
	Dst     netip.AddrPort
	Entries int // conntrack entries holding a port of Egress toward Dst
	// Lo, Hi: the range of the narrowest MASQUERADE rule holding every
	// port chosen toward Dst; MASQUERADE's default (1024-65535) when no
	// rule was read that holds them (Rule "").
	Lo, Hi      int
	Rule        string // "nft table inet eaddr_lab chain post"
	RandomFully bool
	Holders     []SNATHolder // by entries, most first, at most 8; Pod when one of this node has the address
}

// Ports is the budget: the ports the range gives toward Dst.
func (b *SNATBudget) Ports() int { return b.Hi - b.Lo + 1 }

// Percent is the share of the budget held, rounded down.
func (b *SNATBudget) Percent() int { return b.Entries * 100 / max(b.Ports(), 1) }

// Top is the holder with the most entries; nil when none was counted.
func (b *SNATBudget) Top() *SNATHolder {
	if len(b.Holders) == 0 {
		return nil
	}
	return &b.Holders[0]
}

// NodeBudgets is one read of the node netns's conntrack table.
type NodeBudgets struct {
	SNAT      []SNATBudget // the destinations holding the most, most first
	Conntrack *ConntrackUse
	Dropped   int // SNAT entries past the keys counted (nodeBudgetKeys)
}

// nodeBudgetKeys bounds the SNAT keys and (key, source) pairs one read
// counts: a table is counted as it is walked, never held.
const nodeBudgetKeys = 4096

// ReadNodeBudgets reads, in the node's netns (host: its inode), the
// conntrack table's use and its top SNAT budgets, their holders' pods named
// by podOf (kube.Resolver.PodByIP; nil: not named). It waits on netlink:
// call it beside the reader (the port sampler's goroutine), never on it.
func ReadNodeBudgets(host uint64, top int, podOf func(netip.Addr) (*decode.Pod, bool)) (*NodeBudgets, error) {
	ns, err := netdiag.OpenNetns(host)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	nb := &NodeBudgets{}
	var count *nodeport.SNATCount
	var rules []nodeport.Masquerade
	ns.Do(func() error {
		if c, max, err := nodeport.ConntrackUse(); err == nil {
			nb.Conntrack = &ConntrackUse{Count: c, Max: max}
		}
		count, err = nodeport.CountSNAT(nodeBudgetKeys, nil)
		rules, _ = nodeport.ReadMasquerade()
		return nil
	})
	if err != nil {
		return nb, fmt.Errorf("conntrack table: %w%s", err, needNetAdmin(err))
	}
	nb.SNAT, nb.Dropped = SNATBudgets(count, rules, top), count.Dropped
	for i := range nb.SNAT {
		nameHolders(nb.SNAT[i].Holders, podOf)
	}
	return nb, nil
}

// SNATBudgets are the top keys of c by entries (ties by egress and
// destination, so a sample's series do not flap), each with its rule's
// range and its holders.
func SNATBudgets(c *nodeport.SNATCount, rules []nodeport.Masquerade, top int) []SNATBudget {
	keys := make([]nodeport.SNATKey, 0, len(c.ByKey))
	for k := range c.ByKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if c.ByKey[a] != c.ByKey[b] {
			return c.ByKey[a] > c.ByKey[b]
		}
		if a.Egress != b.Egress {
			return a.Egress.Less(b.Egress)
		}
		return a.Dst.Compare(b.Dst) < 0 || a.Dst == b.Dst && a.Proto < b.Proto
	})
	keys = keys[:min(len(keys), top)]
	holders := map[nodeport.SNATKey][]SNATHolder{}
	for src, n := range c.BySource {
		holders[src.SNATKey] = append(holders[src.SNATKey], SNATHolder{Addr: src.Src, Entries: n})
	}
	out := make([]SNATBudget, len(keys))
	for i, k := range keys {
		b := &out[i]
		b.Proto, b.Egress, b.Dst, b.Entries = k.Proto, k.Egress, k.Dst, c.ByKey[k]
		b.Lo, b.Hi = nodeport.DefaultMasqLo, nodeport.DefaultMasqHi
		if span := c.Ports[k]; span[1] != 0 {
			if m, ok := nodeport.Narrowest(rules, span[0], span[1]); ok {
				b.Lo, b.Hi = m.Ports()
				b.Rule, b.RandomFully = masqName(m), m.RandomFully
			}
		}
		b.Holders = sortHolders(holders[k])
		b.Holders = b.Holders[:min(len(b.Holders), snatHoldersMax)]
	}
	return out
}

// warningHolders is how many holders a Warning's note names: a note is cut
// at 1024 bytes, and the fix comes after.
const warningHolders = 3

// Warning is the note of the Warning Event on the pod holding the most of
// b (its top holder), before any connection fails: what is held, by whom,
// what happens at the end of the range, and the fixes.
func (b *SNATBudget) Warning() (verdict string, fix []string) {
	rule := "MASQUERADE's default range, no rule with a narrower one read"
	if b.Rule != "" {
		rule = "the range of " + b.Rule
	}
	verdict = fmt.Sprintf("the node's SNAT holds %d of the %s it can give from %s toward %s (%d%%; %d-%d, %s)",
		b.Entries, portCount(b.Ports()), b.Egress, b.Dst, b.Percent(), b.Lo, b.Hi, rule)
	if n := len(b.Holders); n > 0 {
		verdict += "; entries by pod address: " + holdersText(b.Holders[:min(n, warningHolders)])
		if n > warningHolders {
			verdict += fmt.Sprintf(" and %d more", n-warningHolders)
		}
	}
	verdict += ": once every port is held, MASQUERADE finds none free and the node drops new connections' SYNs toward it, which time out with no error"
	return verdict, snatBudgetFixes(b.Dst, b.Lo, b.Hi, b.Holders)
}
