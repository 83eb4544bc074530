package output

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/eaddr/eaddr/decode"
)

// appendEventFields appends the event object without its closing brace.
func appendEventFields(b []byte, ev *decode.Event, node string) []byte {
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, decode.Schema, 10)
	b = append(b, `,"kind":"`...)
	b = append(b, ev.Kind()...)
	b = append(b, `","time":"`...)
	b = ev.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if node != "" {
		b = append(b, `,"node":`...)
		b = AppendString(b, node)
	}
	b = append(b, `,"syscall":"`...)
	b = ev.Syscall.AppendTo(b)
	b = append(b, '"')
	if !ev.NodePort {
		b = append(b, `,"errno":"`...)
		b = decode.AppendErrnoName(b, ev.Errno)
		b = append(b, `","errno_num":`...)
		b = strconv.AppendInt(b, int64(ev.Errno), 10)
	}
	b = appendProcess(b, ev)
	b = appendSocket(b, ev)
	if ev.Local.Valid {
		b = append(b, `,"local":`...)
		b = appendAddr(b, &ev.Local)
		if ev.LocalReleased {
			b = append(b, `,"local_released":true`...)
		}
	}
	if ev.Remote.Valid {
		b = append(b, `,"remote":`...)
		b = appendAddr(b, &ev.Remote)
	}
	b = append(b, `,"netns":`...)
	b = strconv.AppendUint(b, uint64(ev.NetNS), 10)
	b = append(b, `,"mntns":`...)
	b = strconv.AppendUint(b, uint64(ev.MntNS), 10)
	b = appendAttribution(b, ev)
	if ev.Suppressed > 0 {
		b = append(b, `,"suppressed":`...)
		b = strconv.AppendUint(b, ev.Suppressed, 10)
	}
	if ev.Async || ev.Interrupted {
		if ev.Async {
			b = append(b, `,"async":true`...)
		} else {
			b = append(b, `,"interrupted":true`...)
		}
		b = append(b, `,"async_after_ms":`...)
		b = strconv.AppendFloat(b, float64(ev.AsyncAfter.Microseconds())/1000, 'f', -1, 64)
	}
	if ev.Attempt > 1 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(ev.Attempt), 10)
	}
	return b
}

func appendProcess(b []byte, ev *decode.Event) []byte {
	b = append(b, `,"process":{"pid":`...)
	b = strconv.AppendUint(b, uint64(ev.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(ev.TID), 10)
	b = append(b, `,"ppid":`...)
	b = strconv.AppendUint(b, uint64(ev.PPID), 10)
	b = append(b, `,"uid":`...)
	b = strconv.AppendUint(b, uint64(ev.UID), 10)
	b = append(b, `,"comm":`...)
	b = appendBytesString(b, ev.Comm)
	if len(ev.ExeName) > 0 {
		b = append(b, `,"exe":`...)
		b = appendBytesString(b, ev.ExeName)
	}
	if ev.ExeUnresolved != "" {
		b = append(b, `,"exe_unresolved":`...)
		b = AppendString(b, ev.ExeUnresolved)
	}
	return append(b, '}')
}

func appendSocket(b []byte, ev *decode.Event) []byte {
	b = append(b, `,"socket":{"fd":`...)
	b = strconv.AppendInt(b, int64(ev.FD), 10)
	if ev.HasSocket {
		b = append(b, `,"family":"`...)
		b = append(b, decode.FamilyName(ev.Family)...)
		b = append(b, `","type":"`...)
		b = append(b, decode.SockTypeName(ev.Type)...)
		b = append(b, '"')
		if ev.Protocol != 0 {
			b = append(b, `,"protocol":"`...)
			b = append(b, decode.ProtocolName(ev.Protocol)...)
			b = append(b, '"')
		}
	}
	if ev.SocketCookie != 0 {
		b = append(b, `,"cookie":`...)
		b = strconv.AppendUint(b, ev.SocketCookie, 10)
	}
	return append(b, '}')
}

// appendAttribution appends the cgroup, the pod and host_network, or why
// they are not known.
func appendAttribution(b []byte, ev *decode.Event) []byte {
	b = append(b, `,"cgroup":{"id":`...)
	b = strconv.AppendUint(b, ev.CgroupID, 10)
	if ev.CgroupPath != "" {
		b = append(b, `,"path":`...)
		b = AppendString(b, ev.CgroupPath)
	} else if ev.CgroupUnresolved != "" {
		b = append(b, `,"unresolved":`...)
		b = AppendString(b, ev.CgroupUnresolved)
	}
	b = append(b, '}')
	if p := ev.Pod; p != nil {
		b = appendPod(b, p, ev.PodVia, ev.PodNamesUnresolved)
	} else if ev.PodUnresolved != "" {
		b = append(b, `,"pod_unresolved":`...)
		b = AppendString(b, ev.PodUnresolved)
	}
	if ev.HostNetwork {
		b = append(b, `,"host_network":true`...)
	}
	return b
}

func appendAddr(b []byte, a *decode.Addr) []byte {
	switch {
	case a.Unreadable:
		b = append(b, `{"unreadable":true,"addrlen":`...)
		b = strconv.AppendInt(b, int64(a.Addrlen), 10)
		return append(b, '}')
	case a.Family == decode.AFInet || a.Family == decode.AFInet6:
		if !a.IP.IsValid() { // sockaddr too short to hold the address
			b = append(b, `{"family":"`...)
			b = append(b, decode.FamilyName(a.Family)...)
			return append(b, `"}`...)
		}
		b = append(b, `{"ip":"`...)
		b = a.IP.Addr().AppendTo(b)
		b = append(b, `","port":`...)
		b = strconv.AppendUint(b, uint64(a.IP.Port()), 10)
		return append(b, '}')
	case a.Family == decode.AFUnix:
		b = append(b, `{"family":"unix","path":`...)
		b = appendBytesString(b, a.Path)
		return append(b, '}')
	default:
		b = append(b, `{"family":"`...)
		b = append(b, decode.FamilyName(a.Family)...)
		b = append(b, '"')
		if len(a.Raw) > 0 {
			b = append(b, `,"raw":"`...)
			b = appendHex(b, a.Raw)
			b = append(b, '"')
		}
		return append(b, '}')
	}
}

const hexDigits = "0123456789abcdef"

func appendHex(b, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, so
// a comm or path with arbitrary bytes still gives valid JSON.
func AppendString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendBytesString appends s as a JSON string.
func appendBytesString(b []byte, s []byte) []byte { return appendJSONString(b, s) }

// plainASCII are the bytes a JSON string carries as they are: every
// ASCII byte but the quote, the backslash, the controls and DEL.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != 0x7f
	}
	return t
}()

// plain8 tells whether all of s's 8 bytes are plainASCII, a word at a
// time: none has the high bit (non-ASCII), none is below 0x20 (a
// control), none is '"', '\\' or DEL (0x7f). hasZero(x) is nonzero
// exactly when one of x's bytes is 0, and (w-0x20…)&^w&highs exactly when
// one is below 0x20 (Hacker's Delight; only which byte it flags can be
// wrong, never whether there is one).
func plain8[T string | []byte](s T) bool {
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	bad := w&highs | (w-0x20*ones)&^w&highs | hasZero(w^('"'*ones)) | hasZero(w^('\\'*ones)) | hasZero(w^(0x7f*ones))
	return bad == 0
}

func appendJSONString[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		start := i
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
		for i < len(s) && s[i] < utf8.RuneSelf && plainASCII[s[i]] {
			i++
		}
		b = append(b, s[start:i]...) // a run at once, not a byte at a time
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = appendASCII(b, c)
			i++
			continue
		}
		var r rune
		var size int
		switch v := any(s[i:]).(type) {
		case string:
			r, size = utf8.DecodeRuneInString(v)
		case []byte:
			r, size = utf8.DecodeRune(v)
		}
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

func appendASCII(b []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(b, '\\', c)
	case c == '\n':
		return append(b, '\\', 'n')
	case c == '\t':
		return append(b, '\\', 't')
	case c == '\r':
		return append(b, '\\', 'r')
	case c < 0x20 || c == 0x7f:
		return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
	}
	return append(b, c)
}

// appendPod appends `,"pod":{...}`; empty fields are left out.
func appendPod(b []byte, p *decode.Pod, via, namesUnresolved string) []byte {
	b = append(b, `,"pod":{`...)
	comma := false
	b = appendStrField(b, &comma, "uid", p.UID)
	b = appendStrField(b, &comma, "name", p.Name)
	b = appendStrField(b, &comma, "namespace", p.Namespace)
	b = appendStrField(b, &comma, "container", p.Container)
	b = appendStrField(b, &comma, "container_id", p.ContainerID)
	b = appendStrField(b, &comma, "image", p.Image)
	b = appendStrField(b, &comma, "qos", p.QoS)
	b = appendStrField(b, &comma, "runtime", p.Runtime)
	if len(p.Labels) > 0 {
		b = appendField(b, &comma, "labels")
		b = appendLabels(b, p.Labels)
	}
	b = appendStrField(b, &comma, "via", via)
	b = appendStrField(b, &comma, "names_unresolved", namesUnresolved)
	return append(b, '}')
}

// appendLabels writes labels sorted by key, so the output is stable.
func appendLabels(b []byte, l map[string]string) []byte {
	var keys [32]string
	ks := keys[:0]
	for k := range l {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	b = append(b, '{')
	for i, k := range ks {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		b = AppendString(b, l[k])
	}
	return append(b, '}')
}

func appendStrField(b []byte, comma *bool, name, v string) []byte {
	if v == "" {
		return b
	}
	b = appendField(b, comma, name)
	return AppendString(b, v)
}

// appendField appends `"name":`, after a comma unless it is the first.
func appendField(b []byte, comma *bool, name string) []byte {
	if *comma {
		b = append(b, ',')
	}
	*comma = true
	b = append(b, '"')
	b = append(b, name...)
	return append(b, `":`...)
}
