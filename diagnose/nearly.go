package diagnose

import (
	"fmt"
	"net/netip"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// Nearly is the warning a netns gets before a connect() toward dst fails
// (eaddr trace's port sampler with --kube-events): the port model's look
// at a connect() toward dst now, read again from the netns (through pid or
// another process in it), so that nothing is claimed that is not so. The
// share taken is the sampler's and check's (Destination.Percent): ports held
// toward dst or for every destination, of those the kernel tries; ports whose
// bind bucket could not be read are left out. Below warn percent (the
// sockets changed since the sample) it returns nil and no error.
//
// The Diagnosis names the largest cause, who holds its sockets and the
// fixes, each checked against the netns as a failure's are; when no port is
// left at all, its verdict is the failure's own ("exhausted").
func (d *Diagnoser) Nearly(inode uint64, pid int, dst netip.AddrPort, warn int) (*Diagnosis, error) {
	ns, err := netdiag.OpenNetns(inode, pid)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	p, err := readPorts(ns, d.Iter, false, focus{dst: dst})
	if err != nil {
		return nil, err
	}
	r := portmodel.Connect(p.sc, p.socks, p.sourceFor(netip.Addr{}, dst.Addr()), dst)
	taken := r.FourTuple + r.HeldForAll
	pct := percent(taken, r.Tried)
	groups := groupPorts(p, r)
	if taken == 0 || pct < warn || len(groups) == 0 {
		return nil, nil
	}
	g := &Diagnosis{At: d.now(), HostNetwork: d.HostNetNS != 0 && inode == d.HostNetNS,
		RangeLo: p.sc.Lo, RangeHi: p.sc.Hi, Reserved: spansString(p.sc.Reserved)}
	d.fillBudget(g, p, r)
	what := "toward " + dst.String()
	if r.Exhausted {
		d.portVerdict(g, p, r, groups, what)
		return g, nil
	}
	g.Cause = groups[0].cause
	g.Holders = d.holders(p.ns, p.inodesOf(groups[0].socks))
	g.Verdict = fmt.Sprintf("ephemeral ports nearly exhausted %s: %d of the %d ports %s are taken (%d%%): %s%s; %s%s",
		what, taken, r.Tried, rangeWords(p, r), pct, groupsString(groups), holderWords(g), leftWords(r), cutWords(p))
	d.fixes(g, p, groups)
	return g, nil
}

// leftWords: what is left for the next connect() toward the destination.
func leftWords(r portmodel.Result) string {
	left := r.Free + r.TWReusable
	s := fmt.Sprintf("%d left, then connect() to it fails with EADDRNOTAVAIL", left)
	if r.Unsure > 0 {
		s += fmt.Sprintf(" (and %d held by sockets whose bind bucket could not be read, which may be free toward it)", r.Unsure)
	}
	return s
}
