package pipeline

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// portScene is a netns with a narrowed range, a listener outside it that
// the test dials from inside it, a listener inside it and a bound-only
// socket (both held for every destination), and a process in it.
type portScene struct {
	ns     *netns.NS
	pid    int
	lo, hi int
	target string // the listener outside the range: the destination
	dialed int    // connections toward the target
}

func newPortScene(t *testing.T, lo, hi int) *portScene {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)); err != nil {
		t.Fatal(err)
	}
	s := &portScene{ns: ns, lo: lo, hi: hi}
	l, err := ns.Listen("tcp4", "127.0.0.1:30000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s.target = l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.keep(t, c)
		}
	}()
	inRange, err := ns.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", hi))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inRange.Close() })
	err = ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		t.Cleanup(func() { unix.Close(fd) })
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}) // port 0: one of the range
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "3600")
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s.pid = cmd.Process.Pid
	return s
}

func (s *portScene) keep(t *testing.T, c net.Conn) { t.Cleanup(func() { c.Close() }) }

// dial opens n more connections toward the target.
func (s *portScene) dial(t *testing.T, n int) {
	t.Helper()
	for range n {
		c, err := s.ns.Dial("tcp4", s.target)
		if err != nil {
			t.Fatal(err)
		}
		s.keep(t, c)
		s.dialed++
	}
}

// ss counts, as `ss -tanH` in the netns shows them now, the established
// sockets on a port of the range toward the target, and the listeners on
// one. (ss 6.1 does not show bound-only sockets: the test counts its own.)
func (s *portScene) ss(t *testing.T) (estab, listen int) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(s.pid)+"/ns/net", "ss", "-tanH").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		_, p, _ := net.SplitHostPort(f[3])
		port, _ := strconv.Atoi(p)
		if port < s.lo || port > s.hi {
			continue
		}
		switch {
		case f[0] == "ESTAB" && f[4] == s.target:
			estab++
		case f[0] == "LISTEN":
			listen++
		}
	}
	return estab, listen
}

// sampleOf is the sampler's numbers for the scene's netns, found by the
// real diagnose.NetNSMembers (other netns left out, for speed).
func (s *portScene) sampleOf(t *testing.T) NetNSPorts {
	t.Helper()
	ps := newPortSampler(DefaultPortsInterval, DefaultPortsTop, 0, nil, nil)
	ps.members = func() (map[uint64]int, error) {
		all, err := diagnose.NetNSMembers()
		return map[uint64]int{s.ns.Inode(): all[s.ns.Inode()]}, err
	}
	p, err := ps.sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.NetNS) != 1 || p.Skipped != 0 {
		t.Fatalf("sample %+v, want the scene's netns %d", p, s.ns.Inode())
	}
	return p.NetNS[0]
}

// The sampler's budget equals ss at the same moment, and rises with the
// connections between two samples.
func TestPortSamplerEqualsSS(t *testing.T) {
	s := newPortScene(t, 40000, 40099)
	const boundOnly = 1
	before := 0
	for _, add := range []int{30, 25} {
		s.dial(t, add)
		got := s.sampleOf(t)
		estab, listen := s.ss(t)
		if estab != s.dialed || listen != 1 {
			t.Fatalf("ss: %d established toward %s, %d listeners in range; the test made %d and 1", estab, s.target, listen, s.dialed)
		}
		if got.Usable != 100 || got.HeldForAll != listen+boundOnly {
			t.Errorf("usable %d, held for all %d; want 100, %d (ss's listener and the bound-only socket)", got.Usable, got.HeldForAll, listen+boundOnly)
		}
		if len(got.Top) != 1 || got.Top[0].Remote != s.target || got.Top[0].Ports != estab+listen+boundOnly {
			t.Errorf("top %+v, want %s with %d ports (%d established, as ss shows, and %d held for all)",
				got.Top, s.target, estab+listen+boundOnly, estab, listen+boundOnly)
		}
		if len(got.Top) == 1 && got.Top[0].Ports <= before {
			t.Errorf("ports toward %s did not rise with %d more connections: %d, then %d", s.target, add, before, got.Top[0].Ports)
		}
		if len(got.Top) == 1 {
			before = got.Top[0].Ports
		}
		t.Logf("after %d more: %+v; ss: %d established", add, got, estab)
	}
}
