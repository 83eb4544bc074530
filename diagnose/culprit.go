package diagnose

import (
	"fmt"
	"net/netip"
	"strings"
)

// Culprit is who holds the ports of a destination that check or top warns
// about, and what to do: the diagnosis a connect() toward it gets from
// trace (Nearly, read again from the netns at the audit). Its JSON fields
// sit beside the destination's (check's top_destinations[], top's rows).
type Culprit struct {
	Cause   string          `json:"cause,omitempty"` // one of the Cause* names
	Verdict string          `json:"verdict,omitempty"`
	Holders []CulpritHolder `json:"holders,omitempty"`
	// NoHolder says why no process is named (TIME_WAIT belongs to none;
	// the holders exited, or were not found in time).
	NoHolder string   `json:"holders_unknown,omitempty"`
	Fix      []string `json:"fix,omitempty"`
	// Unknown says why there is no diagnosis: the netns could not be read
	// again, or the destination fell below the mark meanwhile.
	Unknown string `json:"culprit_unknown,omitempty"`
}

// Looked: the culprit was looked for (a diagnosis, or why there is none).
func (c *Culprit) Looked() bool { return c.Cause != "" || c.Verdict != "" || c.Unknown != "" }

// CulpritHolder is a process that holds the ports (Holder), with its pod's
// name when the container runtime knows its UID.
type CulpritHolder struct {
	PID         int       `json:"pid"`
	Comm        string    `json:"comm"`
	Sockets     int       `json:"sockets"`
	PodUID      string    `json:"pod_uid,omitempty"` // from its cgroup path
	ContainerID string    `json:"container_id,omitempty"`
	Pod         *CheckPod `json:"pod,omitempty"`
}

// AuditDiagnoser is the Diagnoser of check's and top's culprits: the
// audit's host netns, NodePort range and socket reader.
func AuditDiagnoser(o AuditOptions) *Diagnoser {
	d := NewDiagnoser()
	d.HostNetNS, d.NodePortLo, d.NodePortHi, d.Iter = o.HostNetNS, o.NodePortLo, o.NodePortHi, o.Iter
	return d
}

// Culprits names the culprit of each of the first n destinations of r at
// or above warn percent: a second look at the netns per destination (a
// socket dump and the holders' search within HoldersWait), paid only for
// those.
func (d *Diagnoser) Culprits(r *NetNSReport, warn, n int) {
	for i := range r.Destinations[:min(n, len(r.Destinations))] {
		dst := &r.Destinations[i]
		if dst.Percent >= warn || dst.Exhausted {
			dst.Culprit = d.culprit(r.Inode, r.PID, dst.Remote, warn)
		}
	}
}

// culprit is Nearly's diagnosis toward remote, or why there is none.
func (d *Diagnoser) culprit(inode uint64, pid int, remote string, warn int) Culprit {
	dst, err := netip.ParseAddrPort(remote)
	if err != nil {
		return Culprit{Unknown: fmt.Sprintf("%q is no address and port: %v", remote, err)}
	}
	g, err := d.Nearly(inode, pid, dst, warn)
	switch {
	case err != nil:
		return Culprit{Unknown: "the network namespace could not be read again: " + err.Error()}
	case g == nil:
		return Culprit{Unknown: fmt.Sprintf("below %d%% at a second look: the sockets changed since the audit", warn)}
	}
	c := Culprit{Cause: g.Cause, Verdict: g.Verdict, Fix: g.Fix}
	for _, h := range g.Holders {
		c.Holders = append(c.Holders, CulpritHolder{PID: h.PID, Comm: h.Comm, Sockets: h.Sockets, PodUID: h.PodUID, ContainerID: h.ContainerID})
	}
	if len(c.Holders) == 0 {
		// holderWords says why none is named: ", no holder found: ..." or "; no process holds them: ..."
		c.NoHolder = strings.TrimLeft(holderWords(g), ",; ")
	}
	return c
}
