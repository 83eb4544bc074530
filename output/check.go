package output

import (
	"fmt"
	"io"
	"strconv"
	"strings"

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
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	comma := true
	b = appendStrField(b, &comma, "comm", r.Comm)
	b = append(b, `,"host_network":`...)
	b = strconv.AppendBool(b, r.Host)
	if p := r.Pod; p != nil {
		b = append(b, `,"pod":{`...)
		c := false
		b = appendStrField(b, &c, "name", p.Name)
		b = appendStrField(b, &c, "namespace", p.Namespace)
		b = appendStrField(b, &c, "uid", p.UID)
		b = append(b, '}')
	}
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
		b = appendIntField(b, "unsure", d.Unsure, true)
		if d.Exhausted {
			b = append(b, `,"exhausted":true`...)
		}
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

// WriteCheckTable writes the report for a person.
func WriteCheckTable(w io.Writer, rep *diagnose.CheckReport) {
	for _, r := range rep.NetNS {
		host := ""
		if r.Host {
			host = " (host)"
		}
		if r.Pod != nil {
			host = fmt.Sprintf(" (pod %s/%s)", r.Pod.Namespace, r.Pod.Name)
		}
		fmt.Fprintf(w, "netns %d%s pid %d %s: %s\n", r.Inode, host, r.PID, r.Comm, strings.ToUpper(r.Worst.String()))
		if r.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", r.Error)
		}
		if r.PortRange != "" {
			res := r.Reserved
			if res == "" {
				res = "none"
			}
			fmt.Fprintf(w, "  range %s, reserved %s, usable %d, in use %d, held for every destination %d, unprivileged ports from %d\n", r.PortRange, res, r.Usable, r.InUse, r.HeldForAll, r.UnprivilegedPort)
		}
		for _, d := range r.Destinations {
			fmt.Fprintf(w, "  toward %-40s %6d ports %3d%%%s\n", d.Remote, d.Ports, d.Percent, destNote(d))
		}
		for _, f := range r.Findings {
			fmt.Fprintf(w, "  %-8s %s\n", strings.ToUpper(f.Severity.String()), f.Message)
		}
	}
	fmt.Fprintf(w, "worst: %s\n", strings.ToUpper(rep.Worst.String()))
}

// destNote: what the table adds to a destination's count.
func destNote(d diagnose.Destination) string {
	switch {
	case d.Exhausted:
		return "  exhausted"
	case d.Unsure > 0:
		return fmt.Sprintf("  (+%d unsure)", d.Unsure)
	}
	return ""
}
