package output

import (
	"strconv"

	"github.com/eaddr/eaddr/decode"
)

// TableHeader is the first line of --output table.
// POD is namespace/name when the runtime named the pod, else "-" (the
// host, or a pod not named: the JSON says why); CGROUP is always there.
const TableHeader = "TIME             SYSCALL ERRNO          PID     COMM             LOCAL                          REMOTE                         NETNS       POD                                      CGROUP"

// AppendTable appends ev as one aligned row (no newline) under TableHeader.
func AppendTable(b []byte, ev *decode.Event) []byte {
	start := len(b)
	b = ev.Time.Local().AppendFormat(b, "15:04:05.000000")
	b = pad(b, start, 17)
	b = ev.Syscall.AppendTo(b)
	b = pad(b, start, 25)
	if ev.NodePort {
		b = append(b, "NODEPORT"...)
	} else {
		b = decode.AppendErrnoName(b, ev.Errno)
	}
	b = pad(b, start, 40)
	b = strconv.AppendUint(b, uint64(ev.PID), 10)
	b = pad(b, start, 48)
	b = appendPrintable(b, ev.Comm)
	b = pad(b, start, 65)
	b = appendAddrText(b, &ev.Local)
	b = pad(b, start, 96)
	b = appendAddrText(b, &ev.Remote)
	b = pad(b, start, 127)
	b = strconv.AppendUint(b, uint64(ev.NetNS), 10)
	b = pad(b, start, 139)
	if p := ev.Pod; p != nil && p.Name != "" && p.Namespace != "" && ev.PodNamesUnresolved == "" {
		b = appendPrintableString(b, p.Namespace)
		b = append(b, '/')
		b = appendPrintableString(b, p.Name)
	} else {
		b = append(b, '-')
	}
	b = pad(b, start, 180)
	if ev.CgroupPath != "" {
		b = appendPrintableString(b, ev.CgroupPath)
	} else {
		b = strconv.AppendUint(b, ev.CgroupID, 10)
	}
	return b
}

// pad fills with spaces up to column col of the row that began at start,
// and always leaves at least one space.
func pad(b []byte, start, col int) []byte {
	b = append(b, ' ')
	for len(b)-start < col {
		b = append(b, ' ')
	}
	return b
}

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
		return appendPrintable(b, a.Path)
	}
	return append(b, decode.FamilyName(a.Family)...)
}

// appendPrintable keeps a terminal safe from control bytes in comm or paths.
func appendPrintable(b, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			c = '?'
		}
		b = append(b, c)
	}
	return b
}

func appendPrintableString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			c = '?'
		}
		b = append(b, c)
	}
	return b
}
