package diagnose

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
)

// Diagnosis is the root cause of one failure, read in the netns of the
// event right after it happened.
type Diagnosis struct {
	Verdict string // one sentence
	Fix     []string
	// Meaning, when set, is what the errno means for this failure, in
	// place of the catalog's general meaning (explain): a timeout whose
	// reply a NodePort rule likely took does not blame the destination.
	Meaning string

	// The port budget of the netns (connect EADDRNOTAVAIL, port-0 bind).
	RangeLo, RangeHi int
	Reserved         string // ip_local_reserved_ports as configured, "" when none
	Usable           int    // ports of the range that are not reserved
	InUse            int    // of those, held toward the remote (connect) or at all (bind)
	States           []Count
	Holders          []Holder

	Addresses   []string // bind EADDRNOTAVAIL: the addresses the netns has
	HostNetwork bool     // the event was in the host's netns
	At          time.Time
	Shared      bool   // reused from an earlier event in the same second
	Err         string // why no snapshot could be taken
}

// Count is a number of sockets in one TCP state.
type Count struct {
	State string
	N     int
}

// Holder is a process and how many of the counted sockets it holds.
type Holder struct {
	PID     int
	Comm    string
	Sockets int
}

type diagEntry struct {
	g     *Diagnosis
	tried time.Time // last snapshot attempt, successful or not
}

// Key identifies the snapshot an event shares with the others of its
// interval: netns, syscall, errno and address (unix: path and mount namespace).
type Key = diagKey

type diagKey struct {
	netns   uint32
	sys     decode.Syscall
	errno   int
	addr    netip.AddrPort
	nodeprt bool
	// unix sockets: the path (or @name) and the mount namespace it is
	// looked up in; addr is unset.
	path string
	mnt  uint32
}

// Diagnoser takes netns snapshots for events. At most one snapshot per
// netns, syscall, errno and address is taken per Interval; events inside
// the interval share it, so a storm of failures is not a storm of netlink
// dumps. Not safe for concurrent use.
type Diagnoser struct {
	Interval    time.Duration
	HoldersWait time.Duration // time budget to find the processes holding sockets
	// ElsewhereWait is the time budget to search the other netns for the
	// sockets bound to a unix socket file that none of the event's netns is.
	ElsewhereWait time.Duration
	NodePortLo    int
	NodePortHi    int
	HostNetNS     uint64        // the node's netns inode, for host-network advice
	NodePortRules NodePortRules // nil: the NodePort rules are not read (nodeport_timeout.go)
	cache         map[diagKey]*diagEntry
	pidByNetNS    map[uint32]int       // a process last seen in each netns: the handle to reach it
	gone          map[uint32]time.Time // netns found without a live process, and when
	now           func() time.Time
	Snapshots     uint64 // snapshots taken (each is one sock_diag dump per family)
	Shared        uint64 // events answered from a snapshot of the same interval
	Unreachable   uint64 // events whose netns had no live process left
	maxCacheSize  int
}

// NewDiagnoser returns a Diagnoser with one snapshot per second and key.
func NewDiagnoser() *Diagnoser {
	host, _ := netdiag.HostInode()
	return &Diagnoser{Interval: time.Second, HoldersWait: 300 * time.Millisecond, ElsewhereWait: 300 * time.Millisecond, NodePortLo: 30000, NodePortHi: 32767,
		HostNetNS: host, cache: map[diagKey]*diagEntry{}, gone: map[uint32]time.Time{}, pidByNetNS: map[uint32]int{}, now: time.Now, maxCacheSize: 4096}
}

// Seen remembers that pid lives in netns, so the netns stays reachable
// after the failing process exits. The tracer calls it for every event.
func (d *Diagnoser) Seen(ev *decode.Event) {
	// Only a netns not seen before: a snapshot replaces the handle with the
	// process it entered through, and the failing pid and its parent are
	// tried first anyway. (A liveness check per event cost 14% of eaddr's
	// CPU at 10k failures/s.)
	if _, ok := d.pidByNetNS[ev.NetNS]; !ok {
		if len(d.pidByNetNS) >= d.maxCacheSize {
			clear(d.pidByNetNS)
		}
		d.pidByNetNS[ev.NetNS] = int(ev.PID)
	}
}

func procAlive(pid uint32) bool { return unix.Kill(int(pid), 0) == nil }

// goneFor is how long a netns without a live process is not searched again.
const goneFor = 10 * time.Second

var errNetNSGone = errors.New("no live process was in it at the last look")

// CacheSizes reports the entries of each cache and their bound.
func (d *Diagnoser) CacheSizes() (snapshots, netnsHandles, bound int) {
	return len(d.cache), len(d.pidByNetNS), d.maxCacheSize
}

// Diagnose returns the diagnosis of ev, or nil for failures it has nothing
// to say about.
func (d *Diagnoser) Diagnose(ev *decode.Event) *Diagnosis {
	key, ok := d.KeyOf(ev)
	if !ok {
		return nil
	}
	now := d.now()
	e := d.cache[key]
	if e != nil && now.Sub(e.tried) < d.Interval {
		d.Shared++
		e.g.Shared = true
		return e.g
	}
	g := d.snapshot(ev, now)
	if e != nil && g.Err != "" && e.g.Err == "" {
		// The netns cannot be read any more (its last process exited): the
		// last snapshot is the best there is; try again next interval.
		e.tried = now
		e.g.Shared = true
		return e.g
	}
	if e == nil {
		if len(d.cache) >= d.maxCacheSize {
			clear(d.cache)
		}
		e = &diagEntry{}
		d.cache[key] = e
	}
	e.g, e.tried = g, now
	return g
}

// KeyOf is the snapshot key of ev; false when there is nothing to diagnose.
func KeyOf(ev *decode.Event) (Key, bool) {
	key := diagKey{netns: ev.NetNS, sys: ev.Syscall, errno: ev.Errno, nodeprt: ev.NodePort}
	switch {
	case unixFailure(ev):
		path := unixPath(ev)
		if path == nil || !unixErrno(ev) {
			return key, false // never port advice for a unix socket
		}
		key.path, key.mnt = string(path), ev.MntNS
	case ev.NodePort, socketErrno(ev): // socket errors: only NodePort suspects (Diagnoser.nodePortSuspect)
		key.addr = ev.Local.IP
	case ev.Syscall == decode.Connect && ev.Errno == decode.EADDRNOTAVAIL, ev.Syscall == decode.Connect && ev.Errno == decode.EADDRINUSE:
		key.addr = ev.Remote.IP
	case ev.Syscall == decode.Bind && (ev.Errno == decode.EADDRINUSE || ev.Errno == decode.EADDRNOTAVAIL):
		key.addr = ev.Local.IP
	default:
		return key, false
	}
	return key, true
}

func (d *Diagnoser) snapshot(ev *decode.Event, now time.Time) *Diagnosis {
	g := &Diagnosis{At: now, HostNetwork: d.HostNetNS != 0 && uint64(ev.NetNS) == d.HostNetNS}
	if unixFailure(ev) {
		d.unixSnapshot(ev, g, now)
		return g
	}
	if ev.NodePort {
		d.nodePort(ev, g, now)
		return g
	}
	if socketErrno(ev) {
		d.nodePortFailure(ev, g, now)
		return g
	}
	ns, err := d.openNetns(ev, now)
	if err != nil {
		d.noNetns(ev, g, err)
		return g
	}
	defer ns.Close()
	sc, err := ns.Sysctls()
	if err != nil {
		g.Err = err.Error()
		g.Verdict = "no diagnosis: reading the netns's sysctls: " + err.Error()
		return g
	}
	g.RangeLo, g.RangeHi, g.Usable = sc.RangeLo, sc.RangeHi, sc.Usable()
	g.Reserved = netdiag.FormatSpans(sc.Reserved)
	socks, err := ns.DumpSockets(ev.Protocol == unix.IPPROTO_UDP)
	if err != nil {
		g.Err = err.Error()
		g.Verdict = "no diagnosis: sock_diag: " + err.Error()
		return g
	}
	switch {
	case ev.Syscall == decode.Connect:
		d.connect(ev, g, &sc, socks, ns)
	case ev.Errno == decode.EADDRINUSE:
		d.bindInUse(ev, g, &sc, socks, ns)
	default:
		d.bindNotAvail(ev, g, ns)
	}
	return g
}

// openNetns opens the netns of ev through the failing process, its parent
// or a process seen in it before, and counts a snapshot.
func (d *Diagnoser) openNetns(ev *decode.Event, now time.Time) (*netdiag.Netns, error) {
	hints := []int{int(ev.PID), int(ev.PPID)}
	if pid, ok := d.pidByNetNS[ev.NetNS]; ok {
		hints = append(hints, pid)
	}
	// A netns found without a live process is not searched for again for
	// goneFor, unless the failing process itself is alive: each search
	// walks /proc.
	if at, ok := d.gone[ev.NetNS]; ok && now.Sub(at) < goneFor && !procAlive(ev.PID) {
		return nil, errNetNSGone
	}
	ns, err := netdiag.OpenNetns(uint64(ev.NetNS), hints...)
	if err != nil {
		if len(d.gone) >= d.maxCacheSize {
			clear(d.gone)
		}
		d.gone[ev.NetNS] = now
		return nil, err
	}
	delete(d.gone, ev.NetNS)
	d.pidByNetNS[ev.NetNS] = ns.PID()
	d.Snapshots++
	return ns, nil
}

func (d *Diagnoser) noNetns(ev *decode.Event, g *Diagnosis, err error) {
	d.Unreachable++
	g.Err = fmt.Sprintf("network namespace %d is gone or has no live process left: %v", ev.NetNS, err)
	g.Verdict = "no diagnosis: " + g.Err
}

// connect EADDRNOTAVAIL / EADDRINUSE: who holds the ports toward the remote.
func (d *Diagnoser) connect(ev *decode.Event, g *Diagnosis, sc *netdiag.PortSysctls, socks []netdiag.Socket, ns *netdiag.Netns) {
	remote := ev.Remote.IP
	ports := map[uint16]bool{}
	states := map[string]int{}
	inodes := map[uint64]bool{}
	perInode := map[uint64]int{}
	for _, s := range socks {
		p := int(s.Local.Port())
		if s.Remote != remote || !Ephemeral(sc, p) || s.State == netdiag.StateListen {
			continue
		}
		ports[s.Local.Port()] = true
		states[netdiag.StateName(s.State)]++
		if s.Inode != 0 {
			inodes[s.Inode] = true
			perInode[s.Inode]++
		}
	}
	g.InUse = len(ports)
	g.States = sortedCounts(states)
	g.Holders = d.holders(ns, inodes, perInode)
	rng := fmt.Sprintf("%d-%d", g.RangeLo, g.RangeHi)
	if g.InUse >= g.Usable {
		g.Verdict = fmt.Sprintf("ephemeral ports exhausted toward %s: %d of %d ports in %s in use (%s%s)",
			remote, g.InUse, g.Usable, rng, countsString(g.States), holdersString(g.Holders))
		d.exhaustedFix(ev, g)
		return
	}
	switch {
	case ev.Local.Valid && ev.Local.IP.Addr().IsValid() && !ev.Local.IP.Addr().IsUnspecified() && ev.Errno == decode.EADDRNOTAVAIL:
		g.Verdict = fmt.Sprintf("the socket was bound to %s, which is not an address of this network namespace", ev.Local.IP.Addr())
		g.Fix = append(g.Fix, "bind to an address the netns has, or to 0.0.0.0 / ::")
	case ev.Local.Valid && ev.Local.IP.Port() != 0:
		g.Verdict = fmt.Sprintf("the socket was bound to local port %d before connect(), and %s:%d -> %s is already in use", ev.Local.IP.Port(), ev.Local.IP.Addr(), ev.Local.IP.Port(), remote)
		g.Fix = append(g.Fix, "do not bind() a fixed port before connect(); if a bind() is needed, set IP_BIND_ADDRESS_NO_PORT so the port is chosen at connect() time for this destination")
	default:
		g.Verdict = fmt.Sprintf("the range is not exhausted toward %s now: %d of %d ports in %s in use (%s); the ports may have been freed since, or taken by port-0 bind() calls without IP_BIND_ADDRESS_NO_PORT",
			remote, g.InUse, g.Usable, rng, countsString(g.States))
	}
}

func (d *Diagnoser) exhaustedFix(ev *decode.Event, g *Diagnosis) {
	if len(g.States) > 0 && g.States[0].State == "TIME_WAIT" {
		g.Fix = append(g.Fix, "most ports are in TIME_WAIT: net.ipv4.tcp_tw_reuse=1 in this netns lets new outgoing connections reuse them; or let the server close first, or keep connections open")
	}
	if len(g.Holders) > 0 && g.States[0].State == "ESTABLISHED" {
		h := g.Holders[0]
		g.Fix = append(g.Fix, fmt.Sprintf("pid %d (%s) holds %d connections to this destination: reuse connections (HTTP keep-alive, a connection pool) instead of opening new ones", h.PID, h.Comm, h.Sockets))
	}
	if g.HostNetwork {
		g.Fix = append(g.Fix, "this is the host network namespace (node daemons, hostNetwork pods): if you widen the range, keep NodePorts out of it: "+NodePortFix(d.NodePortLo, d.NodePortHi))
	} else {
		g.Fix = append(g.Fix, `widen the pod's range: spec.securityContext.sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}] (1024 keeps clear of privileged ports)`)
	}
}

// bind EADDRINUSE: who holds the address:port, or range exhaustion for port 0.
func (d *Diagnoser) bindInUse(ev *decode.Event, g *Diagnosis, sc *netdiag.PortSysctls, socks []netdiag.Socket, ns *netdiag.Netns) {
	want := ev.Local.IP
	states := map[string]int{}
	inodes := map[uint64]bool{}
	perInode := map[uint64]int{}
	if want.Port() == 0 {
		ports := map[uint16]bool{}
		for _, s := range socks {
			if p := int(s.Local.Port()); p >= sc.RangeLo && p <= sc.RangeHi && !sc.IsReserved(p) {
				ports[s.Local.Port()] = true
				states[netdiag.StateName(s.State)]++
			}
		}
		g.InUse = len(ports)
		g.States = sortedCounts(states)
		g.Verdict = fmt.Sprintf("bind() to port 0 found no free port: %d of %d ports in %d-%d in use (%s)", g.InUse, g.Usable, g.RangeLo, g.RangeHi, countsString(g.States))
		d.exhaustedFix(ev, g)
		return
	}
	for _, s := range socks {
		if s.Local.Port() != want.Port() {
			continue
		}
		a := s.Local.Addr()
		if a != want.Addr() && !a.IsUnspecified() && !want.Addr().IsUnspecified() {
			continue
		}
		states[netdiag.StateName(s.State)]++
		if s.Inode != 0 {
			inodes[s.Inode] = true
			perInode[s.Inode]++
		}
	}
	g.States = sortedCounts(states)
	g.Holders = d.holders(ns, inodes, perInode)
	if len(g.States) == 0 {
		g.Verdict = fmt.Sprintf("%s is free now: whatever held it is gone", want)
		return
	}
	g.Verdict = fmt.Sprintf("%s is taken (%s%s)", want, countsString(g.States), holdersString(g.Holders))
	g.Fix = append(g.Fix, "stop the other holder, choose another port, or set SO_REUSEADDR when the holders are TIME_WAIT sockets of an earlier instance")
}

// bind EADDRNOTAVAIL: the address is not in the netns.
func (d *Diagnoser) bindNotAvail(ev *decode.Event, g *Diagnosis, ns *netdiag.Netns) {
	addrs, err := ns.Addrs()
	if err != nil {
		g.Err = err.Error()
	}
	for _, a := range addrs {
		g.Addresses = append(g.Addresses, a.String())
	}
	g.Verdict = fmt.Sprintf("%s is not configured in this network namespace; it has %s", ev.Local.IP.Addr(), strings.Join(g.Addresses, ", "))
	g.Fix = append(g.Fix, "bind to one of the netns's addresses or to 0.0.0.0 / ::; a pod's IP changes when the pod is recreated")
}

func (d *Diagnoser) nodePort(ev *decode.Event, g *Diagnosis, now time.Time) {
	g.Verdict = fmt.Sprintf("source port %d is inside the NodePort range %d-%d: since Kubernetes 1.22 kube-proxy no longer holds NodePorts, so the reply to this connection can be caught by a NodePort rule and sent to a Service backend (kubelet health checks then fail at random); %s",
		ev.Local.IP.Port(), d.NodePortLo, d.NodePortHi, d.ruleText(ev.Local.IP.Port()))
	d.nodePortFixes(ev, g, now) // nodeport_timeout.go
}

func (d *Diagnoser) holders(ns *netdiag.Netns, inodes map[uint64]bool, perInode map[uint64]int) []Holder {
	if len(inodes) == 0 {
		return nil
	}
	byPID := map[int]*Holder{}
	for inode, procs := range ns.Holders(inodes, d.HoldersWait) {
		for _, p := range procs {
			h := byPID[p.PID]
			if h == nil {
				h = &Holder{PID: p.PID, Comm: p.Comm}
				byPID[p.PID] = h
			}
			h.Sockets += perInode[inode]
		}
	}
	var out []Holder
	for _, h := range byPID {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sockets != out[j].Sockets {
			return out[i].Sockets > out[j].Sockets
		}
		return out[i].PID < out[j].PID
	})
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

func sortedCounts(m map[string]int) []Count {
	var out []Count
	for s, n := range m {
		out = append(out, Count{s, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].State < out[j].State
	})
	return out
}

func countsString(c []Count) string {
	var parts []string
	for _, x := range c {
		parts = append(parts, strconv.Itoa(x.N)+" "+x.State)
	}
	if len(parts) == 0 {
		return "no sockets"
	}
	return strings.Join(parts, ", ")
}

func holdersString(h []Holder) string {
	if len(h) == 0 {
		return ""
	}
	var parts []string
	for _, x := range h {
		parts = append(parts, fmt.Sprintf("pid %d %s", x.PID, x.Comm))
	}
	return ", held by " + strings.Join(parts, ", ")
}

// unixFailure reports whether ev is a failure of a unix-domain socket: its
// diagnosis is about a socket file or an abstract name, never about ports.
func unixFailure(ev *decode.Event) bool {
	if ev.NodePort {
		return false
	}
	return (ev.HasSocket && ev.Family == decode.AFUnix) || unixAddr(ev).Family == decode.AFUnix
}

func unixAddr(ev *decode.Event) *decode.Addr {
	if ev.Syscall == decode.Bind {
		return &ev.Local
	}
	return &ev.Remote
}

// unixPath is the path or "@name" that bind() or connect() was given, nil
// when it could not be read.
func unixPath(ev *decode.Event) []byte {
	a := unixAddr(ev)
	if !a.Valid || a.Unreadable || a.Family != decode.AFUnix || len(a.Path) == 0 {
		return nil
	}
	return a.Path
}

// unixErrno: the unix failures with a diagnosis.
func unixErrno(ev *decode.Event) bool {
	switch ev.Syscall {
	case decode.Bind:
		return ev.Errno == decode.EADDRINUSE
	case decode.Connect:
		return ev.Errno == int(unix.ECONNREFUSED) || ev.Errno == int(unix.ENOENT)
	}
	return false
}

// unixLook is what a unix snapshot found about one name.
type unixLook struct {
	name     string
	abstract bool   // "@name": per netns, no file
	file     string // a path's kind: "socket", "directory", ...; "" when absent or unknown
	full     string // a path made absolute in the process's root (relative ones from its cwd)
	fileErr  error  // nil, errNoFile, or why the file could not be looked at
	byName   bool   // sockets were matched by bound name (/proc/net/unix), not by the file's inode
	dirGone  bool   // the path's directory does not exist either
	listen   int    // sockets bound to the name that listen
	bound    int    // sockets bound to the name
	netns    uint64 // the other netns whose sockets are bound to the file; 0: the event's
	searched int    // other netns searched for the file's sockets, of
	others   int    // the other netns of live processes
}

var errNoFile = errors.New("no such file")

// unixSnapshot diagnoses a unix bind() EADDRINUSE, connect() ECONNREFUSED
// or ENOENT: the file at the path (in the failing process's filesystem),
// and the sockets of the netns bound to the path or abstract name (their
// file's inode must be the file's), with their states and holders.
func (d *Diagnoser) unixSnapshot(ev *decode.Event, g *Diagnosis, now time.Time) {
	u := unixLook{name: string(unixPath(ev))}
	u.abstract = u.name[0] == '@'
	var st unix.Stat_t
	if !u.abstract {
		st, u.full, u.fileErr, u.dirGone = d.statUnixPath(ev, u.name)
		if u.fileErr == nil {
			u.file = fileKind(st.Mode)
		}
	}
	if u.fileErr != nil && u.fileErr != errNoFile {
		g.Err = u.fileErr.Error()
		g.Verdict = fmt.Sprintf("no diagnosis: %s could not be looked at in the filesystem of pid %d: %v", u.name, ev.PID, u.fileErr)
		return
	}
	if u.abstract || u.file == "socket" {
		ns, err := d.openNetns(ev, now)
		if err != nil {
			d.noNetns(ev, g, err)
			return
		}
		defer ns.Close()
		if err := d.unixSockets(ns, &u, &st, g); err != nil {
			g.Err = err.Error()
			g.Verdict = "no diagnosis: sock_diag: " + err.Error()
			return
		}
	} else {
		d.Snapshots++ // the file is the whole answer
	}
	switch {
	case ev.Syscall == decode.Bind:
		unixBindInUse(g, &u)
	case ev.Errno == int(unix.ECONNREFUSED):
		unixRefused(g, &u)
	default:
		unixNoEnt(g, &u)
	}
}

// unixSockets counts the sockets of ns bound to u.name: by the socket
// file's inode when sock_diag gives it, else (the /proc/net/unix fallback)
// by the name as bound. A socket file that no socket of ns is bound to may
// be bound from another netns: those of live processes are searched, within
// ElsewhereWait, before a file is called stale.
func (d *Diagnoser) unixSockets(ns *netdiag.Netns, u *unixLook, st *unix.Stat_t, g *Diagnosis) error {
	found, err := d.unixIn(ns, u, st, g)
	if err != nil || found || u.abstract {
		return err
	}
	deadline := time.Now().Add(d.ElsewhereWait)
	u.searched, u.others, err = netdiag.EachNetns(ns.Inode(), deadline, func(n *netdiag.Netns) bool {
		found, _ := d.unixIn(n, u, st, g)
		if found {
			u.netns = n.Inode()
		}
		return found
	})
	return err
}

// unixIn counts the sockets of ns bound to u's name or file into u and g,
// and finds their holders; it reports whether there were any.
func (d *Diagnoser) unixIn(ns *netdiag.Netns, u *unixLook, st *unix.Stat_t, g *Diagnosis) (bool, error) {
	socks, byName, err := ns.DumpUnix()
	if err != nil {
		return false, err
	}
	u.byName = u.byName || byName
	states := map[string]int{}
	inodes := map[uint64]bool{}
	perInode := map[uint64]int{}
	for _, s := range socks {
		var match bool
		switch {
		case u.abstract:
			match = sameAbstract(s.Name, u.name)
		case s.VFSIno != 0:
			match = s.VFSIno == st.Ino && s.VFSDev == st.Dev
		default:
			match = s.Name == u.name || s.Name == u.full
		}
		if !match {
			continue
		}
		u.bound++
		if s.State == netdiag.StateListen {
			u.listen++
		}
		states[unixStateName(s.State)]++
		inodes[s.Inode] = true
		perInode[s.Inode]++
	}
	if u.bound == 0 {
		return false, nil
	}
	g.States = sortedCounts(states)
	g.Holders = d.holders(ns, inodes, perInode)
	return true, nil
}

// sameAbstract compares abstract names; /proc/net/unix shows their NULs as '@'.
func sameAbstract(listed, want string) bool {
	if listed == want {
		return true
	}
	return len(listed) == len(want) && listed == strings.ReplaceAll(want, "\x00", "@")
}

// unixStateName names a unix socket's state as ss does, in the words of
// the inet states: LISTEN, ESTABLISHED (connected) or UNCONNECTED.
func unixStateName(s uint8) string {
	switch s {
	case 7:
		return "UNCONNECTED"
	case 1, 10:
		return netdiag.StateName(s)
	}
	return "unknown:" + strconv.Itoa(int(s))
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	}
	return "special file"
}

// statUnixPath stats path as the failing process sees it: inside its root
// (RESOLVE_IN_ROOT: symlinks resolve in the container), relative paths
// from its cwd. If it exited, its parent or a process seen in its netns
// stands in, if in the same mount namespace (absolute paths only). The
// error is errNoFile when the path does not exist; dirGone says whether its
// directory does not exist either.
func (d *Diagnoser) statUnixPath(ev *decode.Event, path string) (st unix.Stat_t, full string, err error, dirGone bool) {
	pids := []int{int(ev.PID)}
	if strings.HasPrefix(path, "/") {
		pids = append(pids, int(ev.PPID))
		if pid, ok := d.pidByNetNS[ev.NetNS]; ok {
			pids = append(pids, pid)
		}
	}
	err = errors.New("the process has exited and no other process of its mount namespace is known")
	for _, pid := range pids {
		root, full, e := processRoot(pid, ev.MntNS, path)
		if e != nil {
			continue
		}
		defer unix.Close(root)
		if st, err = statInRoot(root, full); err == errNoFile {
			_, e := statInRoot(root, filepath.Dir(full))
			dirGone = e == errNoFile
		}
		return st, full, err, dirGone
	}
	return st, "", err, false
}

// processRoot opens /proc/PID/root of a process in mount namespace mnt and
// makes path absolute in it.
func processRoot(pid int, mnt uint32, path string) (int, string, error) {
	if pid <= 0 {
		return -1, "", unix.ESRCH
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if mnt != 0 {
		if link, err := os.Readlink(proc + "/ns/mnt"); err != nil || link != "mnt:["+strconv.FormatUint(uint64(mnt), 10)+"]" {
			return -1, "", unix.ESRCH // gone, or a reused pid
		}
	}
	if !strings.HasPrefix(path, "/") {
		cwd, err := os.Readlink(proc + "/cwd")
		if err != nil {
			return -1, "", err
		}
		path = cwd + "/" + path
	}
	root, err := unix.Open(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return root, path, err
}

// statInRoot stats path resolved inside root, following symlinks there.
func statInRoot(root int, path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	rel := strings.TrimLeft(path, "/")
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	var fd int
	var err error
	for range 8 {
		if fd, err = unix.Openat2(root, rel, &how); err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	switch {
	case err == unix.ENOENT:
		return st, errNoFile
	case err != nil:
		return st, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, fmt.Errorf("stat %s: %w", path, err)
	}
	return st, nil
}

// unixHolderFix is "pid N (comm)" of the first holder, "" when none.
func unixHolder(g *Diagnosis) string {
	if len(g.Holders) == 0 {
		return ""
	}
	return fmt.Sprintf("pid %d (%s)", g.Holders[0].PID, g.Holders[0].Comm)
}

// bind() EADDRINUSE on a unix socket: the name is bound, or a file exists.
func unixBindInUse(g *Diagnosis, u *unixLook) {
	h := unixHolder(g)
	switch {
	case u.abstract && u.bound > 0:
		g.Verdict = fmt.Sprintf("the abstract unix socket name %s is taken (%s%s)", u.name, countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "stop the process that holds it"+orUnknown(h)+", or bind another name")
	case u.abstract:
		g.Verdict = fmt.Sprintf("the abstract unix socket name %s is free now: whatever held it is gone", u.name)
	case u.fileErr == errNoFile:
		g.Verdict = fmt.Sprintf("%s does not exist now: it was removed after bind() failed", u.name)
	case u.file != "socket":
		g.Verdict = fmt.Sprintf("%s exists and is a %s, not a socket: bind() never replaces an existing file", u.name, u.file)
		g.Fix = append(g.Fix, "bind another path, or move the "+u.file+" away")
	case u.bound > 0:
		g.Verdict = fmt.Sprintf("the socket file %s is in use%s (%s%s)", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "another server already runs on this path: stop the process that holds it"+orUnknown(h)+", or bind another path; removing the file would cut that server off from new clients")
	default:
		g.Verdict = fmt.Sprintf("%s %s: it exists but %s (a process bound it and exited without unlink())%s", staleWord(u), u.name, nobodyBound(u), byNameCaveat(u))
		g.Fix = append(g.Fix, fmt.Sprintf("%sremove the stale socket file %s (a server should unlink() its path before bind())", ifUnsure(u), u.name))
	}
}

// otherNetns says where the sockets bound to a file are, when not in the
// event's netns.
func otherNetns(u *unixLook) string {
	if u.netns == 0 {
		return ""
	}
	return fmt.Sprintf(" by a socket of another network namespace (%d)", u.netns)
}

// staleWord: a file is stale for sure only when every netns was searched.
func staleWord(u *unixLook) string {
	if u.searched < u.others {
		return "probably a stale socket file"
	}
	return "stale socket file"
}

func ifUnsure(u *unixLook) string {
	if u.searched < u.others {
		return "if no server uses it, "
	}
	return ""
}

// nobodyBound says which netns were searched for a socket bound to the file.
func nobodyBound(u *unixLook) string {
	if u.searched < u.others {
		return fmt.Sprintf("no socket of this network namespace, nor of %d of the %d others (the search stopped at its time budget), is bound to it", u.searched, u.others)
	}
	return "no socket of any network namespace with a live process is bound to it"
}

// byNameCaveat says what a match by bound name (the /proc/net/unix
// fallback) cannot see.
func byNameCaveat(u *unixLook) string {
	if !u.byName {
		return ""
	}
	return "; without unix_diag, sockets were matched by the name they were bound with (/proc/net/unix), so one bound to this file through another path is not seen"
}

func orUnknown(holder string) string {
	if holder == "" {
		return " (its process could not be found)"
	}
	return ": " + holder
}

// connect() ECONNREFUSED on a unix socket: nothing listens on the name (the
// kernel found no socket bound to the file, or one that does not listen).
func unixRefused(g *Diagnosis, u *unixLook) {
	h := unixHolder(g)
	switch {
	case u.listen > 0:
		g.Verdict = fmt.Sprintf("%s has a listener now%s (%s%s): it did not listen yet, or no longer, when connect() failed", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "start the client after the server listens, or retry connect()")
	case u.bound > 0:
		g.Verdict = fmt.Sprintf("nobody listens on %s: it is bound%s but not listening (%s%s)", u.name, otherNetns(u), countsString(g.States), holdersString(g.Holders))
		g.Fix = append(g.Fix, "the process that bound it"+orUnknown(h)+" has not called listen(), or is a datagram socket: check the server and the socket type")
	case u.abstract:
		g.Verdict = fmt.Sprintf("nobody listens on the abstract unix socket name %s: no socket of this network namespace has that name (abstract names are per network namespace)", u.name)
		g.Fix = append(g.Fix, "start the server, or run the client in the server's network namespace")
	case u.fileErr == errNoFile:
		g.Verdict = fmt.Sprintf("%s does not exist now: it was removed after connect() was refused", u.name)
	case u.file != "socket":
		g.Verdict = fmt.Sprintf("%s is a %s, not a socket", u.name, u.file)
		g.Fix = append(g.Fix, "connect to the server's socket path")
	default:
		g.Verdict = fmt.Sprintf("%s %s: nobody listens on it (%s; the server exited without removing it)%s", staleWord(u), u.name, nobodyBound(u), byNameCaveat(u))
		g.Fix = append(g.Fix, fmt.Sprintf("start the server (it should unlink() the stale file before bind()), or %sremove the stale socket file %s", ifUnsure(u), u.name))
	}
}

// connect() ENOENT on a unix socket: there is no socket file at the path.
func unixNoEnt(g *Diagnosis, u *unixLook) {
	switch {
	case u.abstract:
		g.Verdict = fmt.Sprintf("no such abstract unix socket name %s", u.name)
	case u.fileErr == nil:
		g.Verdict = fmt.Sprintf("%s exists now (a %s): it was created after connect() failed, the client started before the server", u.name, u.file)
		g.Fix = append(g.Fix, "start the client after the server is ready, or retry connect()")
	case u.dirGone:
		g.Verdict = fmt.Sprintf("no such socket file %s: not even its directory %s exists in the process's filesystem", u.name, filepath.Dir(u.name))
		g.Fix = append(g.Fix, "fix the path; in a container the socket's directory must be mounted (hostPath or a shared emptyDir) where the client looks for it")
	default:
		g.Verdict = fmt.Sprintf("no such socket file %s: the server is not running, has not created it yet, or uses another path", u.name)
		g.Fix = append(g.Fix, "start the server, or fix the path; in a container the socket file must be in a volume the client shares with the server")
	}
}
