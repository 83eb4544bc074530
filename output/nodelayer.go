package output

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// appendNodeLayerJSON appends `,"node_layer":{...}`: what the node did
// with a timed-out connect()'s SYNs (nothing for nil).
func appendNodeLayerJSON(b []byte, n *diagnose.NodeLayer) []byte {
	if n == nil {
		return b
	}
	comma := true // for appendStrField: a field precedes
	b = append(b, `,"node_layer":{"drops":`...)
	b = strconv.AppendInt(b, int64(n.Drops), 10)
	if n.Drops > 0 {
		b = appendTimeField(b, "first_drop", n.First)
		b = append(b, `,"netns":`...)
		b = strconv.AppendUint(b, uint64(n.NetNS), 10)
		b = appendStrField(b, &comma, "in_device", n.InDevice)
		b = appendStrField(b, &comma, "reason", n.Reason)
		b = appendStrField(b, &comma, "freed_in", n.Where)
		if n.CountersKnown {
			b = appendIntField(b, "insert_failed", int(n.InsertFailed), false)
			b = appendIntField(b, "conntrack_drop", int(n.CTDrop), false)
		}
	}
	b = appendSNATJSON(b, n.SNAT)
	if c := n.Conntrack; c != nil {
		b = append(b, `,"conntrack":{"count":`...)
		b = strconv.AppendUint(b, c.Count, 10)
		b = append(b, `,"max":`...)
		b = strconv.AppendUint(b, c.Max, 10)
		b = append(b, '}')
	}
	b = appendTimeField(b, "watching_since", n.WatchingSince)
	return append(b, '}')
}

func appendSNATJSON(b []byte, s *diagnose.SNATUse) []byte {
	if s == nil {
		return b
	}
	comma := true
	b = append(b, `,"snat":{"entries":`...)
	b = strconv.AppendInt(b, int64(s.Entries), 10)
	if s.Egress.IsValid() {
		b = appendAddrPort(b, "egress", s.Egress)
		b = appendAddrPort(b, "destination", s.Dst)
	}
	if s.Hi > 0 {
		b = append(b, `,"port_range":"`...)
		b = strconv.AppendInt(b, int64(s.Lo), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(s.Hi), 10)
		b = append(b, '"')
		b = appendStrField(b, &comma, "rule", s.Rule)
	}
	if s.RandomFully {
		b = append(b, `,"random_fully":true`...)
	}
	if len(s.Holders) > 0 {
		b = append(b, `,"holders":[`...)
		for i, h := range s.Holders {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"ip":"`...)
			b = h.Addr.AppendTo(b)
			b = append(b, `","entries":`...)
			b = strconv.AppendInt(b, int64(h.Entries), 10)
			if p := h.Pod; p != nil {
				b = append(b, `,"pod":{"uid":`...)
				b = AppendString(b, p.UID)
				b = append(b, `,"name":`...)
				b = AppendString(b, p.Name)
				b = append(b, `,"namespace":`...)
				b = AppendString(b, p.Namespace)
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendStrField(b, &comma, "error", s.Err)
	return append(b, '}')
}

func appendAddrPort(b []byte, name string, a netip.AddrPort) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":{"ip":"`...)
	b = a.Addr().AppendTo(b)
	b = append(b, `","port":`...)
	b = strconv.AppendUint(b, uint64(a.Port()), 10)
	return append(b, '}')
}

func appendTimeField(b []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
