package sockscene

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Truth is what the netns looked like right after the failure, read inside
// it by `ss` and from /proc/sys: the ground truth a diagnosis is checked
// against.
type Truth struct {
	Cmd     string         // the ss command line, e.g. "ss -tanpoe"
	Raw     string         // its output
	Sockets []Sock         // every socket it listed
	Ports   []int          // the relevant local ports: ip_local_port_range and the scene's own
	States  map[string]int // per ss state ("ESTAB", "TIME-WAIT"...), sockets whose local port is relevant
	// Sysctls read back: net.ipv4.ip_local_port_range,
	// ip_local_reserved_ports, tcp_tw_reuse, tcp_fin_timeout and, where the
	// kernel has it, tcp_tw_reuse_delay (absent otherwise).
	Sysctls map[string]string
	Addrs   string // `ip -o addr` output
}

// Sock is one line of ss.
type Sock struct {
	State     string // as ss prints it: ESTAB, TIME-WAIT, UNCONN...
	Local     string // e.g. 127.0.0.1:40001, [::1]:80, 0.0.0.0:8080, *:8080
	Peer      string
	LocalPort int // 0 when ss printed "*"
	Users     []User
	Timer     string // timer:(...), when shown
	Inode     uint64 // ino:N, when shown (0 for TIME_WAIT)
	Line      string
}

// User is one users:(("comm",pid=N,fd=M)) entry of ss -p.
type User struct {
	Comm    string
	PID, FD int
}

// truthSysctls are the sysctls read back; the last one may be absent.
var truthSysctls = []string{
	"net.ipv4.ip_local_port_range",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_tw_reuse",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_tw_reuse_delay",
}

// truth reads the scene's Truth (s.Proto decides between ss -t and -u).
func (r *rig) truth(s *Scene) {
	r.t.Helper()
	tr, err := r.readSS(s.Proto, true)
	r.must(err, "truth")
	tr.Sysctls = map[string]string{}
	for _, name := range truthSysctls {
		v, err := r.ns.Sysctl(name)
		if errors.Is(err, fs.ErrNotExist) && name == "net.ipv4.tcp_tw_reuse_delay" {
			continue
		}
		r.must(err, "truth sysctl")
		tr.Sysctls[name] = v
	}
	tr.Addrs = r.ipCmd("-o", "addr")
	s.Truth = tr
}

// readSS runs ss inside the netns (with -p and -e when full) and counts the
// states of the sockets on the relevant ports.
func (r *rig) readSS(proto string, full bool) (Truth, error) {
	args := []string{"-tano"}
	if proto == "udp" {
		args = []string{"-uan"}
	}
	if full {
		args[0] += "pe"
	}
	out, err := r.run(r.ss, args...)
	if err != nil {
		return Truth{}, err
	}
	ports, err := r.relevantPorts()
	if err != nil {
		return Truth{}, err
	}
	tr := Truth{Cmd: "ss " + strings.Join(args, " "), Raw: out, Ports: ports,
		Sockets: parseSS(out), States: map[string]int{}}
	in := map[int]bool{}
	for _, p := range ports {
		in[p] = true
	}
	for _, sk := range tr.Sockets {
		if in[sk.LocalPort] {
			tr.States[sk.State]++
		}
	}
	return tr, nil
}

// relevantPorts is ip_local_port_range and the scene's own ports, sorted.
func (r *rig) relevantPorts() ([]int, error) {
	v, err := r.ns.Sysctl("net.ipv4.ip_local_port_range")
	if err != nil {
		return nil, err
	}
	f := strings.Fields(v)
	if len(f) != 2 {
		return nil, fmt.Errorf("ip_local_port_range %q", v)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("ip_local_port_range %q: %w", v, err)
	}
	seen := map[int]bool{}
	var ports []int
	for p := lo; p <= hi; p++ {
		seen[p] = true
		ports = append(ports, p)
	}
	for _, p := range r.ports {
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	sort.Ints(ports)
	return ports, nil
}

// parseSS reads ss output (header line first): State Recv-Q Send-Q Local
// Peer, then users:(...), timer:(...), ino:N and the like.
func parseSS(out string) []Sock {
	var socks []Sock
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 5 {
			continue
		}
		sk := Sock{State: f[0], Local: f[3], Peer: f[4], Line: line}
		if j := strings.LastIndexByte(sk.Local, ':'); j >= 0 {
			sk.LocalPort, _ = strconv.Atoi(sk.Local[j+1:])
		}
		for _, w := range f[5:] {
			switch {
			case strings.HasPrefix(w, "users:("):
				sk.Users = parseUsers(w)
			case strings.HasPrefix(w, "timer:("):
				sk.Timer = w
			case strings.HasPrefix(w, "ino:"):
				sk.Inode, _ = strconv.ParseUint(w[len("ino:"):], 10, 64)
			}
		}
		socks = append(socks, sk)
	}
	return socks
}

// parseUsers reads users:(("sleep",pid=12,fd=3),("sleep",pid=12,fd=4)).
func parseUsers(w string) []User {
	var users []User
	for _, part := range strings.Split(w, "),(") {
		part = strings.Trim(part, "users:()")
		var u User
		for _, kv := range strings.Split(part, ",") {
			switch {
			case strings.HasPrefix(kv, `"`):
				u.Comm = strings.Trim(kv, `"`)
			case strings.HasPrefix(kv, "pid="):
				u.PID, _ = strconv.Atoi(kv[len("pid="):])
			case strings.HasPrefix(kv, "fd="):
				u.FD, _ = strconv.Atoi(kv[len("fd="):])
			}
		}
		users = append(users, u)
	}
	return users
}
