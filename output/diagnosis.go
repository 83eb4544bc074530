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
	if g.RangeHi > 0 {
		b = append(b, `,"port_range":"`...)
		b = strconv.AppendInt(b, int64(g.RangeLo), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(g.RangeHi), 10)
		b = append(b, `","usable_ports":`...)
		b = strconv.AppendInt(b, int64(g.Usable), 10)
		b = append(b, `,"in_use":`...)
		b = strconv.AppendInt(b, int64(g.InUse), 10)
		if g.Reserved != "" {
			b = append(b, `,"reserved_ports":`...)
			b = AppendString(b, g.Reserved)
		}
	}
	if len(g.States) > 0 {
		b = append(b, `,"states":{`...)
		for i, c := range g.States {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, c.State)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(c.N), 10)
		}
		b = append(b, '}')
	}
	if len(g.Holders) > 0 {
		b = append(b, `,"holders":[`...)
		for i, h := range g.Holders {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendInt(b, int64(h.PID), 10)
			b = append(b, `,"comm":`...)
			b = AppendString(b, h.Comm)
			b = append(b, `,"sockets":`...)
			b = strconv.AppendInt(b, int64(h.Sockets), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(g.Addresses) > 0 {
		b = append(b, `,"addresses":[`...)
		for i, a := range g.Addresses {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, a)
		}
		b = append(b, ']')
	}
	if len(g.Fix) > 0 {
		b = append(b, `,"fix":[`...)
		for i, f := range g.Fix {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, f)
		}
		b = append(b, ']')
	}
	if g.HostNetwork {
		b = append(b, `,"host_network":true`...)
	}
	if g.Shared {
		b = append(b, `,"shared":true`...)
	}
	b = append(b, `,"snapshot_time":"`...)
	b = g.At.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}
