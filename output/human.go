package output

import (
	"strconv"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/termtext"
)

// Human renders failures for a person at a terminal (--output text, the
// default when stdout is one): a few short lines per failure in the
// operator's order (when and who, what failed, what the client printed, the
// cause, the fix), every line within the terminal's width, every byte that
// came from a workload made safe by termtext. It holds no state of its own
// and does not allocate once the caller's buffer has grown.
type Human struct {
	// Width is the terminal's width in columns now (it may change while a
	// trace runs); nil, or a value of 0 or less: DefaultWidth.
	Width func() int
	// Loc is the zone times are shown in, with its name; nil: time.Local.
	Loc *time.Location
}

// textIndent is where the values of a failure's lines start, under its
// labels.
const textIndent = 11

// width is the columns to keep within now.
func (h *Human) width() int {
	w := 0
	if h.Width != nil {
		w = h.Width()
	}
	if w <= 0 {
		w = DefaultWidth
	}
	return max(w, minWidth)
}

// appendTime appends the event's time in layout, which names the zone.
func (h *Human) appendTime(b []byte, t time.Time, layout string) []byte {
	loc := h.Loc
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).AppendFormat(b, layout)
}

// AppendText appends ev as a block of lines, each ended by a newline, with
// x (nil when the event was not explained) and g (nil without a
// diagnosis):
//
//	12:00:01.250 UTC  pod shop/web-7d9f container web · pid 18391 curl
//	  failed   connect() to 10.96.0.10:80: EADDRNOTAVAIL
//	  client   curl (glibc) printed: curl: (7) Failed to connect to ...
//	  cause    ephemeral ports exhausted toward 10.96.0.10:80: ...
//	  fix      pid 17 (app) holds 28232 connections to this destination: ...
func (h *Human) AppendText(b []byte, ev *decode.Event, x *explain.Explanation, g *diagnose.Diagnosis) []byte {
	w := h.width()
	start := len(b)
	b = h.appendTime(b, ev.Time, "15:04:05.000 MST")
	b = append(b, "  "...)
	b = appendWho(b, ev, termtext.Width(view(b[start:])), w)
	b = append(b, '\n')
	b = label(b, "failed")
	var buf [192]byte
	b = appendWrapped(b, view(appendFailed(buf[:0], ev)), textIndent, textIndent, w)
	b = append(b, '\n')
	if x != nil {
		b = appendClientText(b, x, w)
	}
	return appendDiagnosisText(b, g, w)
}

// label starts a labelled line: two spaces, the label, padding to
// textIndent.
func label(b []byte, l string) []byte {
	b = append(b, "  "...)
	b = append(b, l...)
	for i := 2 + len(l); i < textIndent; i++ {
		b = append(b, ' ')
	}
	return b
}

// appendWho appends who failed, wrapped: the pod (by name, else by UID),
// the node's own network, or the network namespace, then the process.
func appendWho(b []byte, ev *decode.Event, col, w int) []byte {
	var buf [512]byte
	t := buf[:0]
	p := ev.Pod
	switch {
	case p != nil && p.Name != "" && p.Namespace != "" && ev.PodNamesUnresolved == "":
		t = append(append(append(append(t, "pod "...), p.Namespace...), '/'), p.Name...)
		if p.Container != "" {
			t = append(append(t, " container "...), p.Container...)
		}
	case p != nil && p.UID != "":
		t = append(append(append(t, "pod uid "...), p.UID...), " (not named by the runtime)"...)
	case ev.HostNetwork:
		t = append(t, "host network"...)
	default:
		t = strconv.AppendUint(append(t, "netns "...), uint64(ev.NetNS), 10)
	}
	t = strconv.AppendUint(append(t, " · pid "...), uint64(ev.PID), 10)
	t = append(append(t, ' '), ev.Comm...)
	return appendWrapped(b, view(t), col, textIndent, w)
}

// fitLine cuts what was appended since start to cols columns, ending it
// with termtext.Ellipsis when it was longer. The text is already safe.
func fitLine(b []byte, start, cols int) []byte {
	line := b[start:]
	if termtext.Width(view(line)) <= cols {
		return b
	}
	head, _ := termtext.Cut(view(line), cols-1)
	b = b[:start+len(head)]
	return append(b, termtext.Ellipsis...)
}

// appendFailed appends what failed: the call, its address and the errno,
// in words a person reads ("connect() to 10.0.0.1:80: EADDRNOTAVAIL"), and
// what else the event says of the call: a non-blocking connect's time, the
// attempt, the failures the rate limit held back. The address may be a
// workload's (a unix socket's path): the caller makes it safe.
func appendFailed(b []byte, ev *decode.Event) []byte {
	b = ev.Syscall.AppendTo(b)
	b = append(b, "() "...)
	a := &ev.Remote
	if ev.Syscall == decode.Bind {
		a = &ev.Local
		b = append(b, "on "...)
	} else {
		b = append(b, "to "...)
	}
	b = appendAddrText(b, a)
	if ev.NodePort {
		b = append(b, " took source port "...)
		b = strconv.AppendUint(b, uint64(ev.Local.IP.Port()), 10)
		return append(b, ", inside the NodePort range"...)
	}
	b = append(b, ": "...)
	b = decode.AppendErrnoName(b, ev.Errno)
	if ev.Async {
		b = append(b, " after "...)
		b = strconv.AppendFloat(b, ev.AsyncAfter.Seconds(), 'f', 1, 64)
		b = append(b, " s (non-blocking connect)"...)
	}
	if ev.Attempt > 1 {
		b = append(b, ", retry "...)
		b = strconv.AppendInt(b, int64(ev.Attempt-1), 10)
	}
	if ev.Suppressed > 0 {
		b = append(b, " (+"...)
		b = strconv.AppendUint(b, ev.Suppressed, 10)
		b = append(b, " like it held back by --rate-limit)"...)
	}
	return b
}
