package output

import (
	"strconv"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// AppendDiagnosisJSON appends `,"diagnosis":{...}` for g (nothing for nil).
func AppendDiagnosisJSON(b []byte, g *diagnose.Diagnosis) []byte {
	if g == nil {
		return b
	}
	b = append(b, `,"diagnosis":{"verdict":`...)
	b = AppendString(b, g.Verdict)
	if g.Cause != "" {
		b = append(b, `,"cause":`...)
		b = AppendString(b, g.Cause)
	}
	b = appendBudgetJSON(b, g)
	b = appendStatesJSON(b, g.States)
	b = appendHoldersJSON(b, g.Holders)
	if p := g.RemotePod; p != nil {
		b = append(b, `,"remote_pod":{"uid":`...)
		b = AppendString(b, p.UID)
		b = append(b, `,"name":`...)
		b = AppendString(b, p.Name)
		b = append(b, `,"namespace":`...)
		b = AppendString(b, p.Namespace)
		b = append(b, '}')
	}
	b = appendNodeLayerJSON(b, g.Node) // nodelayer.go
	if len(g.Addresses) > 0 {
		b = appendStrings(b, "addresses", g.Addresses)
	}
	if len(g.Fix) > 0 {
		b = appendStrings(b, "fix", g.Fix)
	}
	if g.Source != "" {
		b = append(b, `,"sockets_from":`...)
		b = AppendString(b, g.Source)
	}
	if g.HostNetwork {
		b = append(b, `,"host_network":true`...)
	}
	if g.Shared {
		b = append(b, `,"shared":true`...)
	}
	if g.At.IsZero() { // late or skipped: no snapshot was taken
		return append(b, '}')
	}
	b = append(b, `,"snapshot_time":"`...)
	b = g.At.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// appendBudgetJSON: the port budget, when the diagnosis counted one.
func appendBudgetJSON(b []byte, g *diagnose.Diagnosis) []byte {
	if g.RangeHi == 0 {
		return b
	}
	b = append(b, `,"port_range":"`...)
	b = strconv.AppendInt(b, int64(g.RangeLo), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(g.RangeHi), 10)
	b = append(b, '"')
	if g.Reserved != "" {
		b = append(b, `,"reserved_ports":`...)
		b = AppendString(b, g.Reserved)
	}
	if !g.Counted {
		return b // a bind() to a given port or address: no budget counted
	}
	b = appendIntField(b, "usable_ports", g.Usable, false)
	b = appendIntField(b, "in_use", g.InUse, false)
	b = appendIntField(b, "free", g.Free, false)
	b = appendIntField(b, "held_for_all", g.HeldAll, false)
	if g.Unsure > 0 {
		b = appendIntField(b, "unsure", g.Unsure, false)
	}
	if g.Exhausted {
		b = append(b, `,"exhausted":true`...)
	}
	return b
}

func appendStatesJSON(b []byte, states []diagnose.Count) []byte {
	if len(states) == 0 {
		return b
	}
	b = append(b, `,"states":{`...)
	for i, c := range states {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, c.State)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(c.N), 10)
	}
	return append(b, '}')
}

func appendHoldersJSON(b []byte, hs []diagnose.Holder) []byte {
	if len(hs) == 0 {
		return b
	}
	b = append(b, `,"holders":[`...)
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"pid":`...)
		b = strconv.AppendInt(b, int64(h.PID), 10)
		b = append(b, `,"comm":`...)
		b = AppendString(b, h.Comm)
		b = append(b, `,"sockets":`...)
		b = strconv.AppendInt(b, int64(h.Sockets), 10)
		if h.PodUID != "" {
			b = append(b, `,"pod_uid":`...)
			b = AppendString(b, h.PodUID)
		}
		if h.ContainerID != "" {
			b = append(b, `,"container_id":`...)
			b = AppendString(b, h.ContainerID)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}
