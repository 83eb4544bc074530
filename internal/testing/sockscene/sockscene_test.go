package sockscene

import (
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// expect is what a scene must have observed.
type expect struct {
	sys, proto string
	errno      syscall.Errno
	states     map[string]int // exact ss state counts on the relevant ports
	roles      []string       // the holders' roles, in order
	unlisted   int            // holders' sockets ss does not list
}

var expected = map[string]expect{
	"established":          {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"ESTAB": 10}, []string{"clients", "server"}, 0},
	"bind-before-connect":  {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"ESTAB": 10}, []string{"clients", "server"}, 0},
	"bound-only":           {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{}, []string{"clients", "server"}, 10},
	"listener-in-range":    {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"LISTEN": 1, "ESTAB": 9}, []string{"listener", "clients", "server"}, 0},
	"close-wait-leak":      {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"CLOSE-WAIT": 10}, []string{"clients", "server"}, 0},
	"fin-wait2-orphans":    {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"FIN-WAIT-2": 10}, []string{"peer"}, 0},
	"time-wait":            {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"TIME-WAIT": 10}, []string{"server"}, 0},
	"time-wait-loopback":   {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"TIME-WAIT": 10}, []string{"server"}, 0},
	"four-tuple":           {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"ESTAB": 1}, []string{"clients", "server"}, 0},
	"address-gone":         {"bind", "tcp", syscall.EADDRNOTAVAIL, map[string]int{}, nil, 0},
	"address-tentative":    {"bind", "tcp", syscall.EADDRNOTAVAIL, map[string]int{}, nil, 0},
	"bind-port0":           {"bind", "tcp", syscall.EADDRINUSE, map[string]int{"ESTAB": 10}, []string{"clients", "server"}, 0},
	"bind-in-use-listener": {"bind", "tcp", syscall.EADDRINUSE, map[string]int{"LISTEN": 1}, []string{"listener"}, 0},
	"bind-in-use-timewait": {"bind", "tcp", syscall.EADDRINUSE, map[string]int{"TIME-WAIT": 1}, nil, 0},
	"udp-exhausted":        {"connect", "udp", syscall.EAGAIN, map[string]int{"UNCONN": 10}, []string{"clients"}, 0},
	"udp-bind-port0":       {"bind", "udp", syscall.EADDRINUSE, map[string]int{"UNCONN": 10}, []string{"clients"}, 0},
	"reserved":             {"connect", "tcp", syscall.EADDRNOTAVAIL, map[string]int{"ESTAB": 2}, []string{"clients", "server"}, 0},
}

// TestNamesAreBuilt: every name has a builder and an expectation, and back.
func TestNamesAreBuilt(t *testing.T) {
	for _, n := range Names {
		if builders[n] == nil {
			t.Errorf("%s: no builder", n)
		}
		if _, ok := expected[n]; !ok {
			t.Errorf("%s: no expectation in this test", n)
		}
	}
	if len(builders) != len(Names) || len(expected) != len(Names) {
		t.Errorf("%d names, %d builders, %d expectations", len(Names), len(builders), len(expected))
	}
}

// TestScenes builds every scene, checks what it observed and that its
// cleanup left no process, socket or netns reference behind.
func TestScenes(t *testing.T) {
	testenv.RequireRoot(t)
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			before := socketFDs(t)
			var left leftovers
			t.Run("build", func(t *testing.T) {
				s := Build(t, name)
				left = record(t, s)
				checkScene(t, s, expected[name])
			})
			checkGone(t, left)
			if kids := children(t); len(kids) > 0 {
				t.Errorf("child processes of the test left after the scene: %v", kids)
			}
			if after := socketFDs(t); after != before {
				t.Errorf("the test process holds %d sockets after the scene, %d before", after, before)
			}
		})
	}
}

// checkScene checks s against want.
func checkScene(t *testing.T, s *Scene, want expect) {
	t.Helper()
	if s.Errno != want.errno {
		t.Errorf("errno %v (%d), want %v (%d)", s.Errno, int(s.Errno), want.errno, int(want.errno))
	}
	if s.Sys != want.sys || s.Proto != want.proto {
		t.Errorf("%s %s, want %s %s", s.Proto, s.Sys, want.proto, want.sys)
	}
	if s.VictimPID != os.Getpid() {
		t.Errorf("victim pid %d, want the test's %d", s.VictimPID, os.Getpid())
	}
	var roles []string
	unlisted := 0
	for _, h := range s.Holders {
		roles = append(roles, h.Role)
		unlisted += checkHolder(t, s, h)
	}
	if !slices.Equal(roles, want.roles) {
		t.Errorf("holders %v, want %v", roles, want.roles)
	}
	if unlisted != want.unlisted {
		t.Errorf("%d of the holders' sockets not listed by ss, want %d", unlisted, want.unlisted)
	}
	checkTruth(t, s, want)
	checkSpecific(t, s)
	t.Logf("%s: %s %s local %v remote %v: %v; fix %q works %v (%v); twin %q ok %v (%v, control %v); retry %q ok %v after %s; attempts %d; addr %q; notes %q",
		s.Name, s.Proto, s.Sys, s.Local, s.Remote, s.Errno, s.Fix, s.FixWorks, s.FixErrno,
		s.Twin, s.TwinOK, s.TwinErrno, s.ControlErrno, s.Retry, s.RetryOK, s.RetryWaited, s.Attempts, s.AddrFlags, s.Notes)
}

// checkHolder checks that h is alive, another process than the victim, and
// holds exactly its sockets; it returns how many of them ss did not list.
func checkHolder(t *testing.T, s *Scene, h Holder) int {
	t.Helper()
	if h.PID == s.VictimPID || h.PID <= 0 {
		t.Errorf("holder %s: pid %d (victim %d)", h.Role, h.PID, s.VictimPID)
	}
	if h.Comm != "sleep" {
		t.Errorf("holder %s: comm %q", h.Role, h.Comm)
	}
	if st, err := StartTime(h.PID); err != nil || st != h.StartTime {
		t.Errorf("holder %s pid %d not alive (start time %q, %v; recorded %q)", h.Role, h.PID, st, err, h.StartTime)
	}
	got := socketInodes(t, h.PID)
	want := slices.Clone(h.Inodes)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) != h.Sockets || h.Sockets == 0 {
		t.Errorf("holder %s pid %d: /proc fds hold sockets %v, recorded %v (%d)", h.Role, h.PID, got, want, h.Sockets)
	}
	listed := 0
	for _, sk := range s.Truth.Sockets {
		for _, u := range sk.Users {
			if u.PID != h.PID {
				continue
			}
			listed++
			if !slices.Contains(h.Inodes, sk.Inode) || u.Comm != h.Comm {
				t.Errorf("ss lists %q for holder %d, not one of its sockets", sk.Line, h.PID)
			}
		}
	}
	return h.Sockets - listed
}

// checkTruth checks the states and sysctls read after the failure.
func checkTruth(t *testing.T, s *Scene, want expect) {
	t.Helper()
	if !maps.Equal(s.Truth.States, want.states) {
		t.Errorf("states on the relevant ports %v, want %v\n%s", s.Truth.States, want.states, s.Truth.Raw)
	}
	if got := s.Truth.Sysctls["net.ipv4.ip_local_port_range"]; strings.Join(strings.Fields(got), " ") != "40000 40009" {
		t.Errorf("ip_local_port_range read back %q", got)
	}
	for _, k := range truthSysctls {
		if _, ok := s.Truth.Sysctls[k]; !ok && k != "net.ipv4.tcp_tw_reuse_delay" {
			t.Errorf("sysctl %s not read back", k)
		}
	}
	_, err := os.Stat("/proc/sys/net/ipv4/tcp_tw_reuse_delay")
	if _, ok := s.Truth.Sysctls["net.ipv4.tcp_tw_reuse_delay"]; ok != (err == nil) {
		t.Errorf("tcp_tw_reuse_delay read back: %v; the host has it: %v", ok, err == nil)
	}
	if !strings.Contains(s.Truth.Addrs, "127.0.0.1/8") || !strings.HasPrefix(s.Truth.Cmd, "ss -") || s.Truth.Raw == "" {
		t.Errorf("truth not filled: cmd %q addrs %q raw %q", s.Truth.Cmd, s.Truth.Addrs, s.Truth.Raw)
	}
}

// checkSpecific checks what only some scenes record.
func checkSpecific(t *testing.T, s *Scene) {
	t.Helper()
	switch s.Name {
	case "established":
		if !s.OtherDestOK || !s.OtherDest.IsValid() {
			t.Errorf("connect to another destination %v: ok %v", s.OtherDest, s.OtherDestOK)
		}
	case "address-gone":
		if s.AddrFlags != "" {
			t.Errorf("the removed address is still configured: %q", s.AddrFlags)
		}
	case "address-tentative":
		if !strings.Contains(s.AddrFlags, "tentative") {
			t.Errorf("address flags %q, want tentative", s.AddrFlags)
		}
	case "time-wait-loopback":
		if s.Truth.Sysctls["net.ipv4.tcp_tw_reuse"] != "2" || s.Fix == "" || s.Retry == "" {
			t.Errorf("tcp_tw_reuse %q, fix %q, retry %q", s.Truth.Sysctls["net.ipv4.tcp_tw_reuse"], s.Fix, s.Retry)
		}
	case "time-wait":
		if !s.TwinOK || s.ControlErrno != syscall.EADDRNOTAVAIL {
			t.Errorf("twin %q: ok %v (%v), control without the fix %v", s.Twin, s.TwinOK, s.TwinErrno, s.ControlErrno)
		}
	case "bind-in-use-listener":
		if s.Fix == "" || s.FixWorks {
			t.Errorf("fix %q works %v: SO_REUSEADDR cannot bind beside a listener", s.Fix, s.FixWorks)
		}
	case "bind-in-use-timewait":
		// What this kernel does (6.1's inet_bind_conflict too): the
		// TIME_WAIT keeps the earlier socket's SO_REUSEADDR, both need it.
		if s.Fix == "" || s.FixWorks || !s.TwinOK {
			t.Errorf("fix %q works %v (%v); twin %q ok %v (%v)", s.Fix, s.FixWorks, s.FixErrno, s.Twin, s.TwinOK, s.TwinErrno)
		}
	}
}
