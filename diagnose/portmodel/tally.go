package portmodel

import (
	"net/netip"
	"sort"
)

// DefaultMaxDests is the destinations a Tally counts apart unless told
// otherwise; the sockets toward more are counted in Cut.
const DefaultMaxDests = 4096

// maxListeners is the listeners in the range a Tally lists; more are
// counted (ListenersInRange).
const maxListeners = 256

// Tally is one netns's TCP sockets counted as they are read, by what
// Connect needs to know of them: the ports held for every destination, the
// ports whose bind bucket was not read, and per destination and source
// address how many ports hold a connection toward it and of which kind.
// Its memory grows with the ports and destinations of the netns, not with
// its sockets: three PortSets, and at most MaxDests destinations.
//
// Connect gives what Connect would for the same sockets, with the source
// address that holds the most ports toward the destination (for a
// connection that was not bound first, the route's), without a list of
// ports. It holds when the sockets that hold a port for every destination
// (listening, only bound, a bucket made by bind()) are added before the
// others on the same port whose bucket was not read: sock_diag dumps
// listeners and bound-only sockets before the established hash, and the
// BPF readers read every bucket, which a port's sockets share.
type Tally struct {
	s        Sysctls
	reserved *PortSet
	never    int    // the port no call tries (3 ports: the highest); -1 none
	ends     [2]int // the ports only some calls try (lo, hi of an odd count of 5 or more); -1 none
	held     PortSet
	unknown  PortSet
	used     PortSet
	dests    map[netip.AddrPort]*destTally
	maxDests int
	// listeners in the range, up to maxListeners; nListeners counts all
	listeners  []netip.AddrPort
	nListeners int
	cut        int
	// the counts of ports no destination changes, once worked out (an
	// Add forgets them)
	counted                bool
	tried, heldAll, unsure int
}

// destTally is one destination's sockets on ports of the range not held
// for every destination: all of them (total, for the ranking), and those
// on ports connect() tries, per source address.
type destTally struct {
	total int
	srcs  []srcTally
}

// srcTally counts one source's ports toward a destination by the verdict
// the port gets: FourTuple (ft; ftU on a port whose bucket was not read),
// TimeWaitReusable (twr) and Unsure from a TIME_WAIT whose timestamps were
// not read (uns), on ports whose bucket was read. ends is the verdict of
// its socket on each end port (Free: none).
type srcTally struct {
	src               netip.Addr
	ft, ftU, twr, uns int
	ends              [2]Reason
}

// NewTally starts the tally of a netns whose settings are s, with at most
// maxDests destinations apart (0: DefaultMaxDests).
func NewTally(s Sysctls, maxDests int) *Tally {
	if maxDests <= 0 {
		maxDests = DefaultMaxDests
	}
	t := &Tally{s: s, reserved: SpanSet(s.Reserved), never: -1, ends: [2]int{-1, -1}, dests: map[netip.AddrPort]*destTally{}, maxDests: maxDests}
	some, never := scanEdges(s.Lo, s.Hi)
	if len(never) == 1 {
		t.never = never[0]
	}
	if len(some) == 2 {
		t.ends = [2]int{some[0], some[1]}
	}
	return t
}

// Sysctls are the settings the tally was started with.
func (t *Tally) Sysctls() Sysctls { return t.s }

// inRange: a port of ip_local_port_range that is not reserved.
func (t *Tally) inRange(p uint16) bool {
	return int(p) >= t.s.Lo && int(p) <= t.s.Hi && !t.reserved.Has(p)
}

// tried: a port some connect() tries (Result.Tried's).
func (t *Tally) isTried(p uint16) bool { return t.inRange(p) && int(p) != t.never }

// Add counts one socket; all but TCP ones are left out.
func (t *Tally) Add(sk *Socket) {
	if sk.Proto != TCP {
		return
	}
	t.counted = false
	p := sk.Local.Port()
	in := t.inRange(p)
	switch {
	case sk.Bucket == BucketByBind || sk.State == stateListen || sk.State == stateClose:
		t.held.Add(p)
	case sk.Bucket == BucketUnknown:
		t.unknown.Add(p)
	}
	if sk.State == stateListen {
		if in {
			t.nListeners++
			if len(t.listeners) < maxListeners {
				t.listeners = append(t.listeners, sk.Local)
			}
		}
		return
	}
	if !in {
		return
	}
	t.used.Add(p)
	if sk.State == stateClose || sk.Remote.Port() == 0 || t.held.Has(p) {
		return
	}
	t.toward(sk, p)
}

// toward counts a socket on port p of the range, not held for every
// destination, toward its remote address.
func (t *Tally) toward(sk *Socket, p uint16) {
	dst := netip.AddrPortFrom(sk.Remote.Addr().Unmap(), sk.Remote.Port())
	d := t.dests[dst]
	if d == nil {
		if len(t.dests) >= t.maxDests {
			t.cut++
			return
		}
		d = &destTally{}
		t.dests[dst] = d
	}
	d.total++
	if !t.isTried(p) || sk.BoundDev != 0 {
		return // fourTuple: a socket bound to a device does not match an unbound one
	}
	st := d.source(sk.Local.Addr().Unmap())
	b := FourTuple
	if sk.State == stateTimeWait {
		b = twReuse(t.s, *sk, false).why
	}
	for i, e := range t.ends {
		if int(p) == e {
			st.ends[i] = b
		}
	}
	switch {
	case t.unknown.Has(p) && b == FourTuple:
		st.ftU++
	case t.unknown.Has(p): // Unsure, counted with the port
	case b == FourTuple:
		st.ft++
	case b == TimeWaitReusable:
		st.twr++
	default:
		st.uns++
	}
}

// source is the tally of src toward d, made on first use.
func (d *destTally) source(src netip.Addr) *srcTally {
	for i := range d.srcs {
		if d.srcs[i].src == src {
			return &d.srcs[i]
		}
	}
	d.srcs = append(d.srcs, srcTally{src: src})
	return &d.srcs[len(d.srcs)-1]
}

// busiest is the source that holds the most ports toward d (then the one
// with the most TIME_WAIT, then the lowest address); zero for none.
func (d *destTally) busiest() srcTally {
	var best srcTally
	for i, s := range d.srcs {
		ft, bft := s.ft+s.ftU, best.ft+best.ftU
		if i == 0 || ft > bft || (ft == bft && (s.twr+s.uns > best.twr+best.uns ||
			(s.twr+s.uns == best.twr+best.uns && s.src.Less(best.src)))) {
			best = s
		}
	}
	return best
}

// Connect is what Connect says of a connect() toward dst from the source
// that holds the most ports toward it, and that source (invalid when no
// socket goes to dst); Result.Ports is not listed.
func (t *Tally) Connect(dst netip.AddrPort) (Result, netip.Addr) {
	var st srcTally
	if d := t.dests[netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())]; d != nil {
		st = d.busiest()
	}
	t.count()
	var r Result
	r.Tried, r.HeldForAll = t.tried, t.heldAll
	r.FourTuple, r.TWReusable = st.ft+st.ftU, st.twr
	r.Unsure = t.unsure - st.ftU + st.uns
	r.Free = r.Tried - r.HeldForAll - r.FourTuple - r.TWReusable - r.Unsure
	t.endCalls(&r, &st)
	r.Exhausted = r.Free == 0 && r.TWReusable == 0 && r.SomeCalls == 0 && r.Unsure == 0
	return r, st.src
}

// count works out the ports tried, those held for every destination, and
// those not held whose bucket was not read.
func (t *Tally) count() {
	if t.counted {
		return
	}
	t.tried, t.heldAll, t.unsure = 0, 0, 0
	for w := range t.held {
		m := t.triedMask(w)
		t.tried += popcount(m)
		t.heldAll += popcount(m & t.held[w])
		t.unsure += popcount(m & t.unknown[w] &^ t.held[w])
	}
	t.counted = true
}

// endCalls moves the usable ends of an odd range to SomeCalls as tally
// does: of two usable ends the first counts as sure.
func (t *Tally) endCalls(r *Result, st *srcTally) {
	var v [2]Reason
	usable := 0
	for i, e := range t.ends {
		if e < 0 || t.reserved.Has(uint16(e)) {
			v[i] = Reserved
			continue
		}
		v[i] = t.verdictAt(uint16(e), st.ends[i])
		if v[i] == Free || v[i] == TimeWaitReusable {
			usable++
		}
	}
	for i := range v {
		if (v[i] != Free && v[i] != TimeWaitReusable) || (usable == 2 && i == 0) {
			continue
		}
		r.SomeCalls++
		if v[i] == Free {
			r.Free--
		} else {
			r.TWReusable--
		}
	}
}

// verdictAt is connectPort's verdict at port p, whose socket toward the
// destination (if any) had base verdict b.
func (t *Tally) verdictAt(p uint16, b Reason) Reason {
	switch {
	case t.held.Has(p):
		return HeldForAll
	case t.unknown.Has(p) && b != FourTuple:
		return Unsure
	}
	return b
}

// triedMask is the ports of word w that some connect() tries.
func (t *Tally) triedMask(w int) uint64 {
	m := spanMask(w, t.s.Lo, t.s.Hi) &^ t.reserved[w]
	if t.never >= 0 && t.never/64 == w {
		m &^= 1 << (t.never % 64)
	}
	return m
}

// Idle is Connect toward no destination: the ports held for every
// destination, and those whose bucket was not read.
func (t *Tally) Idle() Result {
	r, _ := t.Connect(netip.AddrPort{})
	return r
}

// Busiest are the n destinations toward which the most sockets hold a
// port of the range that is not held for every destination, most first
// (then by address).
func (t *Tally) Busiest(n int) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(t.dests))
	for a := range t.dests {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := t.dests[out[i]].total, t.dests[out[j]].total; a != b {
			return a > b
		}
		return out[i].String() < out[j].String()
	})
	return out[:min(len(out), n)]
}

// InUse is the ports of the range held by a socket that does not listen.
func (t *Tally) InUse() int { return t.used.Len() }

// Listeners are the listening sockets on a port of the range (at most
// maxListeners of them), and how many there are.
func (t *Tally) Listeners() ([]netip.AddrPort, int) { return t.listeners, t.nListeners }

// Cut is the sockets not counted toward their destination because
// MaxDests others were counted first: the busiest list may miss one.
func (t *Tally) Cut() int { return t.cut }

// Dests is how many destinations are counted apart.
func (t *Tally) Dests() int { return len(t.dests) }
