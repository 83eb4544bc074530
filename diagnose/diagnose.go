package diagnose

import (
	"errors"
	"fmt"
	"net/netip"
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
	Holders          []Holder // who holds the sockets of the main cause (never the failing process for its own sake)

	// What the port model (diagnose/portmodel) found, for connect() and
	// port-0 bind(): Usable is the ports the kernel tries, Free those it
	// could give now (TIME_WAIT it may reuse counted), HeldAll those held
	// for every destination (bind()-made buckets), Unsure those whose
	// bucket could not be read.
	Cause     string // one of the Cause* names; "" when the diagnosis is about something else
	Counted   bool   // the model counted the budget below (connect(), port-0 bind(), UDP autobind)
	Exhausted bool   // the model finds no port for this call now
	Free      int
	HeldAll   int
	Unsure    int
	Source    string // where the sockets were read: "iterator", or "sock_diag: why"

	// RemotePod is the pod on this node the connect() went to, by its
	// address (the runtime's list, fresh): set for a host process's
	// connect from a NodePort-range source port (a kubelet probe), so that
	// the probed pod can be told. nil when none or not known.
	RemotePod *decode.Pod

	// Node is what the node did with a timed-out connect()'s SYNs, from
	// its drops (nodelayer.go); nil when not asked.
	Node *NodeLayer

	Addresses   []string // bind EADDRNOTAVAIL: the addresses the netns has
	HostNetwork bool     // the event was in the host's netns
	At          time.Time
	Shared      bool   // reused from an earlier event of its key (the trace's diagnosis stage)
	Err         string // why no snapshot could be taken
}

// Count is a number of sockets in one TCP state.
type Count struct {
	State string
	N     int
}

// Holder is a process and how many of the counted sockets it holds, with
// its pod when its cgroup is a pod's (it may be another pod than the failing
// process's: hostNetwork pods share the node's netns).
type Holder struct {
	PID         int
	Comm        string
	Sockets     int
	PodUID      string // from its cgroup path; "" outside a pod
	ContainerID string
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
	remote  netip.AddrPort // NodePort suspects: the destination, whose pod the diagnosis names
	// unix sockets: the path (or @name) and the mount namespace it is
	// looked up in; addr is unset.
	path string
	mnt  uint32
}

// Diagnoser takes netns snapshots for events: one per call of Diagnose.
// Sharing a snapshot among the events of one interval is its caller's (the
// trace's diagnosis stage keeps the one cache, per Key: a storm of failures
// is not a storm of netlink dumps). Not safe for concurrent use.
type Diagnoser struct {
	HoldersWait time.Duration // time budget to find the processes holding sockets
	// ElsewhereWait is the time budget to search the other netns for the
	// sockets bound to a unix socket file that none of the event's netns is.
	ElsewhereWait time.Duration
	NodePortLo    int
	NodePortHi    int
	HostNetNS     uint64 // the node's netns inode, for host-network advice
	// Iter reads a netns's sockets with the BPF socket iterator (bind
	// buckets, reuse flags, TIME_WAIT timestamps); nil: sock_diag only,
	// and the diagnosis says what that cannot see.
	Iter          netdiag.SocketReader
	NodePortRules NodePortRules // nil: the NodePort rules are not read (nodeport_timeout.go)
	// NodeDrops are the node's drops of new flows' first packets; with
	// them, a connect() that timed out is told which layer dropped its
	// SYNs (nodelayer.go). nil: not watched.
	NodeDrops *DropBook
	// Pods names the pod of a destination address (kube.Resolver.PodByIP)
	// and, when it has PodByNetNS (kube.Resolver does), the pod whose
	// sandbox a netns is, for a netns in which no process runs in a pod's
	// cgroup (owner.go); nil: not asked.
	Pods interface {
		PodByIP(netip.Addr) (*decode.Pod, bool)
	}
	pidByNetNS   map[uint32]int       // a process last seen in each netns: the handle to reach it
	gone         map[uint32]time.Time // netns found without a live process, and when
	now          func() time.Time
	Snapshots    uint64 // snapshots taken (each is one sock_diag dump per family)
	Unreachable  uint64 // events whose netns had no live process left
	maxCacheSize int
}

// NewDiagnoser returns a Diagnoser.
func NewDiagnoser() *Diagnoser {
	host, _ := netdiag.HostInode()
	return &Diagnoser{HoldersWait: 300 * time.Millisecond, ElsewhereWait: 300 * time.Millisecond, NodePortLo: 30000, NodePortHi: 32767,
		HostNetNS: host, gone: map[uint32]time.Time{}, pidByNetNS: map[uint32]int{}, now: time.Now, maxCacheSize: 4096}
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

// CacheSizes reports the netns handles kept and their bound.
func (d *Diagnoser) CacheSizes() (netnsHandles, bound int) {
	return len(d.pidByNetNS), d.maxCacheSize
}

// Diagnose returns the diagnosis of ev, or nil for failures it has nothing
// to say about (d.KeyOf is false). A caller that worked the key out already
// calls Snapshot.
func (d *Diagnoser) Diagnose(ev *decode.Event) *Diagnosis {
	if _, ok := d.KeyOf(ev); !ok {
		return nil
	}
	return d.Snapshot(ev)
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
		key.addr, key.remote = ev.Local.IP, ev.Remote.IP
	case ev.Syscall == decode.Connect && ev.Errno == decode.EADDRNOTAVAIL, ev.Syscall == decode.Connect && ev.Errno == decode.EADDRINUSE:
		key.addr = ev.Remote.IP
	case ev.Syscall == decode.Connect && ev.Errno == int(unix.EAGAIN) && ev.Protocol == unix.IPPROTO_UDP:
		key.addr = ev.Remote.IP // UDP autobind: the port is the socket's, whatever the destination
	case ev.Syscall == decode.Bind && (ev.Errno == decode.EADDRINUSE || ev.Errno == decode.EADDRNOTAVAIL):
		key.addr = ev.Local.IP
	default:
		return key, false
	}
	return key, true
}

// Snapshot takes a snapshot of ev's netns and diagnoses ev, whose key
// (KeyOf) is known to be diagnosable.
func (d *Diagnoser) Snapshot(ev *decode.Event) *Diagnosis {
	now := d.now()
	g := &Diagnosis{At: now, HostNetwork: d.HostNetNS != 0 && uint64(ev.NetNS) == d.HostNetNS}
	if unixFailure(ev) {
		d.unixSnapshot(ev, g, now)
		return g
	}
	if ev.NodePort {
		d.nodePort(ev, g, now)
		return g
	}
	if d.nodePortSuspect(ev) {
		d.nodePortFailure(ev, g, now)
		return g
	}
	if socketErrno(ev) {
		d.nodeLayer(ev, g) // nodeLayerSuspect: KeyOf lets no other socket error through
		return g
	}
	ns, err := d.openNetns(ev, now)
	if err != nil {
		d.noNetns(ev, g, err)
		return g
	}
	defer ns.Close()
	p, err := readPorts(ns, d.Iter, ev.Protocol == unix.IPPROTO_UDP, focusOf(ev))
	if err != nil {
		g.Err = err.Error()
		g.Verdict = "no diagnosis: reading the netns's ports: " + err.Error()
		return g
	}
	p.pod = ev.Pod
	g.RangeLo, g.RangeHi = p.sc.Lo, p.sc.Hi
	g.Reserved = spansString(p.sc.Reserved)
	switch {
	case ev.Syscall == decode.Connect && ev.Errno == int(unix.EAGAIN):
		d.udpConnect(ev, g, p)
	case ev.Syscall == decode.Connect:
		d.connect(ev, g, p)
	case ev.Errno == decode.EADDRINUSE:
		d.bindInUse(ev, g, p)
	default:
		d.bindNotAvail(ev, g, p)
	}
	return g
}

// focusOf is the sockets ev's diagnosis needs kept: a connect()'s toward
// its destination (and those that hold a port for all), a bind()'s all.
func focusOf(ev *decode.Event) focus {
	if ev.Syscall == decode.Connect && ev.Errno != int(unix.EAGAIN) && ev.Remote.Valid {
		return focus{dst: ev.Remote.IP}
	}
	return focus{all: ev.Syscall == decode.Bind}
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

func (d *Diagnoser) nodePort(ev *decode.Event, g *Diagnosis, now time.Time) {
	g.RemotePod = d.remotePod(ev)
	g.Verdict = fmt.Sprintf("source port %d is inside the NodePort range %d-%d: since Kubernetes 1.22 kube-proxy no longer holds NodePorts, so the reply to this connection can be caught by a NodePort rule and sent to a Service backend (kubelet health checks then fail at random); %s",
		ev.Local.IP.Port(), d.NodePortLo, d.NodePortHi, d.ruleText(ev.Local.IP.Addr(), ev.Local.IP.Port()))
	d.nodePortFixes(ev, g, now) // nodeport_timeout.go
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

// remotePod is the pod on this node that ev's connect() went to, when the
// runtime's fresh list has one with that address.
func (d *Diagnoser) remotePod(ev *decode.Event) *decode.Pod {
	if d.Pods == nil || !ev.Remote.Valid || !ev.Remote.IP.Addr().IsValid() {
		return nil
	}
	p, ok := d.Pods.PodByIP(ev.Remote.IP.Addr())
	if !ok || p.Name == "" {
		return nil
	}
	return p
}
