package explain

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
)

// The meaning of an errno is the one of its syscall and the socket's
// protocol; an unknown protocol gets the entry for any, which names the
// protocols' meanings side by side.
func TestMeaningByProtocol(t *testing.T) {
	c, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sys      decode.Syscall
		errno    int
		proto    string
		has, not []string
	}{
		{decode.Connect, int(unix.EAGAIN), protoUDP, []string{"autobind", "bound by UDP sockets"}, []string{"backlog"}},
		{decode.Connect, int(unix.EAGAIN), protoUnix, []string{"backlog is full"}, []string{"autobind"}},
		{decode.Connect, int(unix.EAGAIN), "", []string{"unix", "UDP"}, nil},
		{decode.Connect, int(unix.EAGAIN), protoTCP, []string{"old kernels"}, nil},
		{decode.Bind, decode.EADDRINUSE, protoUDP, []string{"UDP socket", "udp_lib_get_port"}, []string{"listener"}},
		{decode.Bind, decode.EADDRINUSE, protoTCP, []string{"TCP socket", "listener"}, []string{"udp_lib_get_port"}},
		{decode.Bind, decode.EADDRINUSE, protoUnix, []string{"path"}, []string{"ip_local_port_range"}},
		{decode.Bind, decode.EADDRINUSE, "", []string{"TCP", "UDP"}, nil},
		// Not "no free local port" as the cause: one of three, named.
		{decode.Connect, decode.EADDRNOTAVAIL, protoTCP, []string{"could not give this connect() a local address and port", "4-tuple", "no longer"}, []string{"found no free local port"}},
		{decode.Connect, decode.EADDRNOTAVAIL, "", []string{"4-tuple"}, nil},
		{decode.Connect, decode.EADDRNOTAVAIL, protoUDP, []string{"UDP", "EAGAIN"}, []string{"4-tuple"}},
		{decode.Connect, int(unix.ECONNREFUSED), protoTCP, []string{"reset"}, []string{"unix"}},
		{decode.Connect, int(unix.ECONNREFUSED), protoUnix, []string{"unix socket path"}, []string{"reset"}},
		// Entries for either syscall and any protocol still answer.
		{decode.Bind, int(unix.EINVAL), protoUDP, []string{"invalid arguments"}, nil},
	} {
		m := c.meaningOf(tc.sys, tc.errno, tc.proto)
		name := tc.sys.String() + " " + decode.ErrnoName(tc.errno) + " " + tc.proto
		if m == nil {
			t.Errorf("%s: no meaning", name)
			continue
		}
		for _, s := range tc.has {
			if !strings.Contains(m.Meaning, s) {
				t.Errorf("%s: meaning %q lacks %q", name, m.Meaning, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(m.Meaning, s) {
				t.Errorf("%s: meaning %q says %q", name, m.Meaning, s)
			}
		}
	}
	if m := c.meaningOf(decode.Connect, 200, protoTCP); m != nil {
		t.Errorf("errno 200: meaning %+v, want none", m)
	}
}

// Each entry names a known protocol, and no two entries share a syscall,
// errno and protocol: the first would hide the other.
func TestMeaningEntriesDistinct(t *testing.T) {
	c, _ := loadCatalog()
	seen := map[string]bool{}
	for _, e := range c.Errnos {
		switch e.Proto {
		case "", "*", protoTCP, protoUDP, protoUnix:
		default:
			t.Errorf("%s %s: protocol %q is none of tcp, udp, unix, *", e.Syscall, e.Errno, e.Proto)
		}
		p := e.Proto
		if p == "" {
			p = "*"
		}
		k := e.Syscall + " " + e.Errno + " " + p
		if seen[k] {
			t.Errorf("two entries for %s", k)
		}
		seen[k] = true
	}
}

// protoOf reads the socket fields of the event, and says "" when it
// cannot tell.
func TestProtoOf(t *testing.T) {
	for _, tc := range []struct {
		ev   decode.Event
		want string
	}{
		{decode.Event{HasSocket: true, Family: decode.AFInet, Protocol: 17}, protoUDP},
		{decode.Event{HasSocket: true, Family: decode.AFInet6, Protocol: 136}, protoUDP},
		{decode.Event{HasSocket: true, Family: decode.AFInet, Protocol: 6}, protoTCP},
		{decode.Event{HasSocket: true, Family: decode.AFInet6, Protocol: 262}, protoTCP},
		{decode.Event{HasSocket: true, Family: decode.AFUnix, Protocol: 0}, protoUnix},
		{decode.Event{HasSocket: true, Family: decode.AFInet, Protocol: 132}, ""},
		{decode.Event{HasSocket: false, Family: decode.AFInet, Protocol: 17}, ""},
	} {
		if got := protoOf(&tc.ev); got != tc.want {
			t.Errorf("protoOf(family %d protocol %d socket %v) = %q, want %q", tc.ev.Family, tc.ev.Protocol, tc.ev.HasSocket, got, tc.want)
		}
	}
}
