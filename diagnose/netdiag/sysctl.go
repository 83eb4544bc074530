package netdiag

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// PortSysctls are the port settings of one netns.
type PortSysctls struct {
	RangeLo, RangeHi  int        // net.ipv4.ip_local_port_range
	Reserved          []PortSpan // net.ipv4.ip_local_reserved_ports, e.g. "30000-32767,8080"
	UnprivilegedStart int        // net.ipv4.ip_unprivileged_port_start
	TCPTWReuse        int        // net.ipv4.tcp_tw_reuse (0, 1, 2)
}

// PortSpan is an inclusive range of ports; a single port has Lo == Hi.
type PortSpan struct{ Lo, Hi int }

// IsReserved reports whether port p is in ip_local_reserved_ports.
func (s *PortSysctls) IsReserved(p int) bool {
	for _, r := range s.Reserved {
		if p >= r.Lo && p <= r.Hi {
			return true
		}
	}
	return false
}

// Usable is the number of ports of the range [RangeLo, RangeHi] that are not
// reserved. (It does not subtract ports that are in use.)
func (s *PortSysctls) Usable() int {
	if s.RangeHi < s.RangeLo {
		return 0
	}
	n := s.RangeHi - s.RangeLo + 1
	spans := slices.Clone(s.Reserved)
	slices.SortFunc(spans, func(a, b PortSpan) int { return a.Lo - b.Lo })
	next := s.RangeLo // ports below next are already accounted for
	for _, r := range spans {
		lo, hi := max(r.Lo, next), min(r.Hi, s.RangeHi)
		if lo <= hi {
			n -= hi - lo + 1
			next = hi + 1
		}
	}
	return n
}

// sysctlDir is where the per-netns port sysctls live, once opened from a
// thread inside the namespace.
const sysctlDir = "/proc/sys/net/ipv4/"

// Sysctls reads ip_local_port_range, ip_local_reserved_ports,
// ip_unprivileged_port_start and tcp_tw_reuse of the netns, from one thread
// inside it.
func (n *Netns) Sysctls() (PortSysctls, error) {
	var raw [4]string
	names := [4]string{"ip_local_port_range", "ip_local_reserved_ports", "ip_unprivileged_port_start", "tcp_tw_reuse"}
	err := n.ns.Do(func() error {
		for i, name := range names {
			b, err := os.ReadFile(sysctlDir + name)
			if err != nil {
				return err
			}
			raw[i] = strings.TrimSpace(string(b))
		}
		return nil
	})
	if err != nil {
		return PortSysctls{}, fmt.Errorf("netdiag: Sysctls in %s: %w", nsLink(n.inode), err)
	}
	var s PortSysctls
	bad := func(i int, err error) (PortSysctls, error) {
		return PortSysctls{}, fmt.Errorf("netdiag: Sysctls in %s: net.ipv4.%s=%q: %w", nsLink(n.inode), names[i], raw[i], err)
	}
	f := strings.Fields(raw[0])
	if len(f) != 2 {
		return bad(0, fmt.Errorf("want two fields"))
	}
	if s.RangeLo, err = strconv.Atoi(f[0]); err != nil {
		return bad(0, err)
	}
	if s.RangeHi, err = strconv.Atoi(f[1]); err != nil {
		return bad(0, err)
	}
	if s.Reserved, err = ParseReserved(raw[1]); err != nil {
		return bad(1, err)
	}
	if s.UnprivilegedStart, err = strconv.Atoi(raw[2]); err != nil {
		return bad(2, err)
	}
	if s.TCPTWReuse, err = strconv.Atoi(raw[3]); err != nil {
		return bad(3, err)
	}
	return s, nil
}

// ParseReserved parses the ip_local_reserved_ports text ("", "8080",
// "30000-32767,40000"): comma-separated ports or inclusive ranges, each
// within 0-65535 with lo <= hi. Surrounding white space is ignored. It is
// exported for tests.
func ParseReserved(s string) ([]PortSpan, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var spans []PortSpan
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		loS, hiS, isRange := strings.Cut(part, "-")
		lo, err := parsePort(loS)
		if err != nil {
			return nil, fmt.Errorf("reserved ports %q: %q: %w", s, part, err)
		}
		hi := lo
		if isRange {
			if hi, err = parsePort(hiS); err != nil {
				return nil, fmt.Errorf("reserved ports %q: %q: %w", s, part, err)
			}
			if hi < lo {
				return nil, fmt.Errorf("reserved ports %q: %q: range ends before it starts", s, part)
			}
		}
		spans = append(spans, PortSpan{lo, hi})
	}
	return spans, nil
}

// parsePort parses a decimal port number 0-65535 (digits only).
func parsePort(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a port number")
	}
	p, err := strconv.Atoi(s)
	if err != nil || p > 65535 {
		return 0, fmt.Errorf("not a port number")
	}
	return p, nil
}

// FormatSpans writes spans as ip_local_reserved_ports does: "30000-32767,8080".
func FormatSpans(spans []PortSpan) string {
	var b []byte
	for i, x := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x.Lo), 10)
		if x.Hi != x.Lo {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(x.Hi), 10)
		}
	}
	return string(b)
}
