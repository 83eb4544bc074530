package output

import (
	"strconv"

	"github.com/eaddr/eaddr/diagnose"
)

// AppendCheckReport appends the report as one JSON object; fields that do not
// apply are left out, never null.
func AppendCheckReport(b []byte, rep *diagnose.CheckReport) []byte {
	b = append(b, `{"node_port_range":`...)
	b = AppendString(b, rep.NodePortRange)
	b = append(b, `,"netns":[`...)
	for i := range rep.NetNS {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNetNSReport(b, &rep.NetNS[i])
	}
	b = append(b, `],"worst":`...)
	b = AppendString(b, rep.Worst.String())
	return append(b, '}')
}

func appendNetNSReport(b []byte, r *diagnose.NetNSReport) []byte {
	b = append(b, `{"inode":`...)
	b = strconv.AppendUint(b, r.Inode, 10)
	b = appendIntField(b, "pid", r.PID, true)
	comma := true
	b = appendStrField(b, &comma, "comm", r.Comm)
	b = appendStrField(b, &comma, "mount", r.Mount)
	b = append(b, `,"host_network":`...)
	b = strconv.AppendBool(b, r.Host)
	b = appendCheckPod(b, r.Pod)
	b = appendStrField(b, &comma, "port_range", r.PortRange)
	b = appendStrField(b, &comma, "reserved_ports", r.Reserved)
	b = appendIntField(b, "unprivileged_port_start", r.UnprivilegedPort, true)
	b = appendIntField(b, "usable_ports", r.Usable, true)
	b = appendIntField(b, "ports_in_use", r.InUse, false)
	if r.PortRange != "" {
		b = appendIntField(b, "held_for_all", r.HeldForAll, false)
	}
	b = appendIntField(b, "unsure", r.Unsure, true)
	b = appendStrField(b, &comma, "sockets_from", r.Source)
	b = appendDestinations(b, r.Destinations)
	if len(r.Listeners) > 0 {
		b = appendStrings(b, "listeners_in_range", r.Listeners)
	}
	b = appendFindings(b, r.Findings)
	b = append(b, `,"worst":`...)
	b = AppendString(b, r.Worst.String())
	b = appendStrField(b, &comma, "error", r.Error)
	return append(b, '}')
}

func appendDestinations(b []byte, ds []diagnose.Destination) []byte {
	if len(ds) == 0 {
		return b
	}
	b = append(b, `,"top_destinations":[`...)
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"remote":`...)
		b = AppendString(b, d.Remote)
		b = appendIntField(b, "ports", d.Ports, false)
		b = appendIntField(b, "percent", d.Percent, false)
		b = appendIntField(b, "held_toward", d.Toward, false)
		b = appendIntField(b, "held_for_all", d.HeldForAll, false)
		b = appendIntField(b, "unsure", d.Unsure, true)
		if d.Exhausted {
			b = append(b, `,"exhausted":true`...)
		}
		b = appendIntField(b, "tried", d.Tried, false)
		b = appendCulprit(b, &d.Culprit)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendFindings(b []byte, fs []diagnose.Finding) []byte {
	if len(fs) > 0 {
		b = append(b, `,"findings":[`...)
		for i, f := range fs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"severity":`...)
			b = AppendString(b, f.Severity.String())
			b = append(b, `,"message":`...)
			b = AppendString(b, f.Message)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return b
}

// appendIntField appends `,"name":n`, or nothing for 0 when omitZero.
func appendIntField(b []byte, name string, n int, omitZero bool) []byte {
	if n == 0 && omitZero {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, int64(n), 10)
}

// appendCulprit: a warned destination's cause, verdict, holders and fix
// (or why they are not known), beside its counts; nothing for the others.
func appendCulprit(b []byte, c *diagnose.Culprit) []byte {
	comma := true
	b = appendStrField(b, &comma, "cause", c.Cause)
	b = appendStrField(b, &comma, "verdict", c.Verdict)
	if len(c.Holders) > 0 {
		b = append(b, `,"holders":[`...)
		for i, h := range c.Holders {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendInt(b, int64(h.PID), 10)
			b = appendStrField(b, &comma, "comm", h.Comm)
			b = appendIntField(b, "sockets", h.Sockets, false)
			b = appendStrField(b, &comma, "pod_uid", h.PodUID)
			b = appendStrField(b, &comma, "container_id", h.ContainerID)
			b = appendCheckPod(b, h.Pod)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendStrField(b, &comma, "holders_unknown", c.NoHolder)
	if len(c.Fix) > 0 {
		b = appendStrings(b, "fix", c.Fix)
	}
	return appendStrField(b, &comma, "culprit_unknown", c.Unknown)
}

// appendCheckPod: `,"pod":{...}` for a pod, nothing for nil.
func appendCheckPod(b []byte, p *diagnose.CheckPod) []byte {
	if p == nil {
		return b
	}
	b = append(b, `,"pod":{`...)
	c := false
	b = appendStrField(b, &c, "name", p.Name)
	b = appendStrField(b, &c, "namespace", p.Namespace)
	b = appendStrField(b, &c, "uid", p.UID)
	return append(b, '}')
}
