package decode

import (
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/recorded"
)

// fixedDecoder decodes with boot time 0 = 2026-01-01T00:00:00Z, so the
// expected outputs do not depend on when the test runs.
func fixedDecoder() *Decoder {
	c := &BootClock{RefreshEvery: time.Duration(1<<63 - 1), measured: time.Now().Add(time.Hour)}
	c.offset = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	return &Decoder{Clock: c}
}

// TestRecordedFields checks the meaning of a few recorded events field by
// field, so the golden files are not the only thing that says what is right.
func TestRecordedFields(t *testing.T) {
	d := fixedDecoder()
	for _, tc := range []struct {
		file             string
		syscall          Syscall
		errno            int
		comm             string
		family, protocol string
		local, remote    string // "" means absent
	}{
		{"connect-eaddrnotavail-curl-ipv4", Connect, EADDRNOTAVAIL, "curl", "inet", "tcp", "0.0.0.0:0", "127.0.0.1:8080"},
		{"connect-eaddrnotavail-wget-ipv6", Connect, EADDRNOTAVAIL, "wget", "inet6", "tcp", "[::]:0", "[::1]:8080"},
		{"bind-eaddrinuse-python3-ipv4", Bind, EADDRINUSE, "python3", "inet", "tcp", "127.0.0.1:", ""},
		{"bind-eaddrnotavail-python3-ipv4", Bind, EADDRNOTAVAIL, "python3", "inet", "tcp", "192.0.2.1:4242", ""},
		{"bind-eaddrnotavail-python3-ipv6", Bind, EADDRNOTAVAIL, "python3", "inet6", "tcp", "[2001:db8::1]:80", ""},
		{"connect-econnrefused-python3-ipv4", Connect, 111, "python3", "inet", "tcp", "0.0.0.0:0", "127.0.0.1:9"},
		{"connect-econnrefused-python3-unix-abstract", Connect, 111, "python3", "unix", "", "", "@eaddr-abstract"},
		{"connect-enoent-curl-unix", Connect, 2, "curl", "unix", "", "", "/var/run/nscd/socket"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var ev Event
			d.Decode(recorded.Raw(t, tc.file), &ev)
			if ev.Syscall != tc.syscall || ev.Errno != tc.errno || string(ev.Comm) != tc.comm {
				t.Errorf("got %v %d %q, want %v %d %q", ev.Syscall, ev.Errno, ev.Comm, tc.syscall, tc.errno, tc.comm)
			}
			if !ev.HasSocket || FamilyName(ev.Family) != tc.family {
				t.Errorf("socket family %q (has socket %v), want %q", FamilyName(ev.Family), ev.HasSocket, tc.family)
			}
			if tc.protocol != "" && ProtocolName(ev.Protocol) != tc.protocol {
				t.Errorf("protocol %q, want %q", ProtocolName(ev.Protocol), tc.protocol)
			}
			check := func(what string, a Addr, want string) {
				t.Helper()
				got := addrText(&a)
				switch {
				case want == "" && a.Valid:
					t.Errorf("%s = %s, want absent", what, got)
				case strings.HasSuffix(want, ":") && !strings.HasPrefix(got, want):
					t.Errorf("%s = %s, want prefix %s", what, got, want)
				case want != "" && !strings.HasSuffix(want, ":") && got != want:
					t.Errorf("%s = %s, want %s", what, got, want)
				}
			}
			check("local", ev.Local, tc.local)
			check("remote", ev.Remote, tc.remote)
			if ev.PID == 0 || ev.NetNS == 0 || ev.MntNS == 0 {
				t.Errorf("pid %d netns %d mntns %d: want all set", ev.PID, ev.NetNS, ev.MntNS)
			}
		})
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	raw := recorded.Raw(t, "connect-eaddrnotavail-curl-ipv4")
	d := fixedDecoder()
	var ev Event
	n := testing.AllocsPerRun(1000, func() {
		d.Decode(raw, &ev)
	})
	if n != 0 {
		t.Errorf("decode allocates %.1f times per event, want 0", n)
	}
}

func TestErrnoNames(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{99, "EADDRNOTAVAIL"}, {98, "EADDRINUSE"}, {111, "ECONNREFUSED"}, {11, "EAGAIN"}, {0, "unknown:0"}, {200, "unknown:200"}, {-3, "unknown:-3"}} {
		if got := ErrnoName(tc.n); got != tc.want {
			t.Errorf("ErrnoName(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{{"EADDRNOTAVAIL", 99, true}, {"eaddrinuse", 98, true}, {" 111 ", 111, true}, {"EWOULDBLOCK", 11, true}, {"0", 0, false}, {"256", 0, false}, {"ENOPE", 0, false}, {"", 0, false}} {
		got, err := ParseErrno(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseErrno(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// A boot time read between two wall-clock reads maps between them, give or
// take the clock's own uncertainty (half the tightest of its realtime,
// boottime, realtime sandwiches): no tolerance that a busy machine, which can
// stop this goroutine between any two reads, could outrun.
func TestBootClock(t *testing.T) {
	c := NewBootClock()
	before := time.Now()
	boot := bootNow(t)
	after := time.Now()
	got := c.Wall(boot)
	c.mu.Lock()
	u := time.Duration(c.uncertainty)
	c.mu.Unlock()
	if got.Before(before.Add(-u)) || got.After(after.Add(u)) {
		t.Errorf("boot time %d maps to %v, outside [%v, %v] widened by the clock's uncertainty %v", boot, got, before, after, u)
	}
	t.Logf("offset uncertainty %v; read within %v", u, after.Sub(before))
	if got.Location() != time.UTC {
		t.Errorf("location %v, want UTC", got.Location())
	}
}

// addrText is how the checks above write an address: ip:port, the path, or
// "-" when absent.
func addrText(a *Addr) string {
	switch {
	case !a.Valid:
		return "-"
	case a.Unreadable:
		return "(unreadable)"
	case (a.Family == AFInet || a.Family == AFInet6) && a.IP.IsValid():
		return a.IP.String()
	case a.Family == AFUnix:
		return string(a.Path)
	}
	return FamilyName(a.Family)
}
