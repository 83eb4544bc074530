package output

import (
	"strconv"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/termtext"
)

// TableHeader is the first line of --output table. ADDRESS is where the call
// went: the destination of a connect(), the address a bind() asked for. POD
// is namespace/name when the runtime named the pod, its UID when only the
// cgroup path told that, "(host)" for the node's own network namespace,
// else the network namespace, "netns:INODE" (no pod, or one eaddr could not
// tell: the JSON says why).
const TableHeader = "TIME          CALL    ERRNO         PID     COMM            ADDRESS                POD"

// The columns of TableHeader: at 120 columns a pod's UID (36) fits whole.
const (
	colCall    = 14
	colErrno   = 22
	colPID     = 36
	colComm    = 44
	colAddress = 60
	colPod     = 83
)

// AppendRow appends ev as one row under TableHeader and, under it, which
// client it was and what it printed (x, nil when not explained), the cause
// and each fix (g, nil without a diagnosis), every line ended by a newline
// and within the terminal's width.
func (h *Human) AppendRow(b []byte, ev *decode.Event, x *explain.Explanation, g *diagnose.Diagnosis) []byte {
	w := h.width()
	b = h.appendRowLine(b, ev, w)
	if x != nil {
		b = append(b, "    ↳ "...)
		var head [96]byte
		hd := appendClientName(head[:0], x)
		b = append(b, hd...)
		b = appendRowClient(b, x, 6+termtext.Width(view(hd)), w)
		b = append(b, '\n')
	}
	if g == nil {
		return b
	}
	if g.Verdict != "" {
		b = append(b, "    ⚑ "...)
		b = appendWrapped(b, g.Verdict, 6, 6, w)
		b = append(b, '\n')
	}
	for _, f := range g.Fix {
		b = append(b, "    → fix: "...)
		b = appendWrapped(b, f, 11, 6, w)
		b = append(b, '\n')
	}
	return b
}

// appendRowClient appends what the client printed, or the words to grep.
func appendRowClient(b []byte, x *explain.Explanation, col, w int) []byte {
	const template, printed, grep = " prints (<...> varies): ", " printed: ", ": words not known, grep for"
	switch {
	case x.HasClientMessage && x.Confidence == explain.ConfidenceTemplate:
		b = append(b, template...)
		return appendWrapped(b, view(x.ClientMessage), col+len(template), 6, w)
	case x.HasClientMessage:
		b = append(b, printed...)
		return appendWrapped(b, view(x.ClientMessage), col+len(printed), 6, w)
	case len(x.Grep) > 0:
		b = append(b, grep...)
		return appendGrep(b, x.Grep, col+len(grep), 6, w)
	}
	return b
}

// appendRowLine appends the row itself, cut to w columns: the POD column
// takes what is left of them.
func (h *Human) appendRowLine(b []byte, ev *decode.Event, w int) []byte {
	start := len(b)
	b = h.appendTime(b, ev.Time, "15:04:05 MST")
	col := termtext.Width(view(b[start:]))
	b, col = padCol(b, col, colCall)
	n := len(b)
	b = ev.Syscall.AppendTo(b)
	col += len(b) - n
	b, col = padCol(b, col, colErrno)
	n = len(b)
	if ev.NodePort {
		b = append(b, "NODEPORT"...)
	} else {
		b = decode.AppendErrnoName(b, ev.Errno)
	}
	col += len(b) - n
	b, col = padCol(b, col, colPID)
	n = len(b)
	b = strconv.AppendUint(b, uint64(ev.PID), 10)
	col += len(b) - n
	b, col = padCol(b, col, colComm)
	n = len(b)
	b = termtext.AppendFit(b, view(ev.Comm), 15)
	col += termtext.Width(view(b[n:]))
	b, col = padCol(b, col, colAddress)
	n = len(b)
	b = appendRowAddress(b, ev)
	col += termtext.Width(view(b[n:]))
	if col+2 < w {
		b, col = padCol(b, col, min(colPod, w-2))
		b = appendPodCell(b, ev, w-col)
	}
	// A terminal narrower than the columns cuts the row, never wraps it.
	return append(fitLine(b, start, w), '\n')
}

// padCol pads with spaces from column col to column to, leaving at least one.
func padCol(b []byte, col, to int) ([]byte, int) {
	b = append(b, ' ')
	col++
	for ; col < to; col++ {
		b = append(b, ' ')
	}
	return b, col
}

// appendRowAddress appends where the call went, made safe (a unix socket's
// path is the workload's) and at most 40 columns.
func appendRowAddress(b []byte, ev *decode.Event) []byte {
	a := &ev.Remote
	if ev.Syscall == decode.Bind {
		a = &ev.Local
	}
	var buf [128]byte
	return termtext.AppendFit(b, view(appendAddrText(buf[:0], a)), 40)
}

// appendPodCell appends the POD column, cut to cols columns.
func appendPodCell(b []byte, ev *decode.Event, cols int) []byte {
	if cols < 1 {
		return b
	}
	p := ev.Pod
	switch {
	case p != nil && p.Name != "" && p.Namespace != "" && ev.PodNamesUnresolved == "":
		start := len(b)
		b = termtext.Append(b, p.Namespace)
		b = append(b, '/')
		b = termtext.Append(b, p.Name)
		return fitLine(b, start, cols)
	case p != nil && p.UID != "":
		start := len(b)
		b = termtext.Append(b, p.UID)
		return fitLine(b, start, cols)
	case ev.HostNetwork:
		return termtext.AppendFit(b, "(host)", cols)
	}
	start := len(b)
	b = append(b, "netns:"...)
	b = strconv.AppendUint(b, uint64(ev.NetNS), 10)
	return fitLine(b, start, cols)
}

// appendAddrText appends an address as a person reads it: ip:port,
// [ip6]:port, a unix socket's path (raw: the caller makes it safe), or the
// family's name.
func appendAddrText(b []byte, a *decode.Addr) []byte {
	if !a.Valid {
		return append(b, '-')
	}
	if a.Unreadable {
		return append(b, "(unreadable)"...)
	}
	switch {
	case (a.Family == decode.AFInet || a.Family == decode.AFInet6) && a.IP.IsValid():
		return a.IP.AppendTo(b)
	case a.Family == decode.AFUnix:
		return append(b, a.Path...)
	}
	return append(b, decode.FamilyName(a.Family)...)
}
