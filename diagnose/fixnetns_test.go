package diagnose

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// served is a port a test netns serves on.
type served struct {
	proto string // "tcp" or "udp"
	port  int
}

// fixNetns is a throwaway netns whose range is lo-hi, with listeners the
// test holds (the first TCP one on 0.0.0.0, which the connections go to)
// and conns connections toward the first, each from a port of the range;
// a sleeping process in it (its sandbox, pid) is how eaddr reaches it.
type fixNetns struct {
	ns     *netns.NS
	pid    int
	served []served
	dst    netip.AddrPort // what the connections go to: 127.0.0.1 and the first TCP port

	mu       sync.Mutex
	open     []io.Closer // every socket the test holds in it: restart closes them
	accepted chan struct{}
	sinkUp   bool
}

func newFixNetns(t *testing.T, lo, hi int, srv []served, conns int) *fixNetns {
	t.Helper()
	f := fixIn(t, testns.New(t), lo, hi, srv, conns)
	f.pid = startIn(t, f.ns)
	return f
}

// namedFixNetns is newFixNetns's netns made by `ip netns add` instead, with
// no process in it: only its mount under /run/netns keeps it.
func namedFixNetns(t *testing.T, lo, hi int, srv []served, conns int) *fixNetns {
	t.Helper()
	testenv.RequireRoot(t)
	ip := testenv.Program(t, "ip", "iproute2")
	name := fmt.Sprintf("eaddr-fix-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v: %s", err, out)
		}
	})
	if out, err := exec.Command(ip, "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v: %s", err, out)
	}
	ns, err := netns.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return fixIn(t, ns, lo, hi, srv, conns)
}

// fixIn sets ns's range, opens the served sockets and the connections.
func fixIn(t *testing.T, ns *netns.NS, lo, hi int, srv []served, conns int) *fixNetns {
	t.Helper()
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)); err != nil {
		t.Fatal(err)
	}
	f := &fixNetns{ns: ns, served: srv, accepted: make(chan struct{}, conns)}
	t.Cleanup(f.restart)
	for _, s := range srv {
		f.serve(t, s)
	}
	for i := 0; i < conns; i++ {
		c, err := ns.Dial("tcp4", f.dst.String())
		if err != nil {
			t.Fatalf("connection %d of %d toward %s: %v", i+1, conns, f.dst, err)
		}
		f.keep(c)
		<-f.accepted
	}
	if conns > 0 {
		if c, err := ns.Dial("tcp4", f.dst.String()); !errors.Is(err, unix.EADDRNOTAVAIL) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("one more connection toward %s: %v, want EADDRNOTAVAIL", f.dst, err)
		}
	}
	return f
}

// serve opens the listener or UDP socket of s.
func (f *fixNetns) serve(t *testing.T, s served) {
	t.Helper()
	addr := fmt.Sprintf("0.0.0.0:%d", s.port)
	if s.proto == "udp" {
		err := f.ns.Do(func() error {
			c, err := net.ListenPacket("udp4", addr)
			if err == nil {
				f.keep(c)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	l, err := f.ns.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	f.keep(l)
	if !f.dst.IsValid() {
		f.dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.port))
		go f.accept(l)
	}
}

func (f *fixNetns) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		f.keep(c)
		f.accepted <- struct{}{}
	}
}

func (f *fixNetns) keep(c io.Closer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = append(f.open, c)
}

// restart closes every socket the test holds in the netns, as a restart of
// its programs does after they were down longer than their TIME_WAITs last
// (a connection closed with SO_LINGER 0 resets and leaves none: a server's
// TIME_WAIT on its own port would keep connect() off it for 60 s): their
// ports are free until they bind them again.
func (f *fixNetns) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.open {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	f.open = nil
}

// event is the failed connect() toward the first listener, from the
// sandbox: what eaddr reads for it.
func (f *fixNetns) event() *decode.Event {
	return &decode.Event{Syscall: decode.Connect, Errno: int(unix.EADDRNOTAVAIL), NetNS: uint32(f.ns.Inode()), PID: uint32(f.pid), PPID: uint32(os.Getpid()),
		HasSocket: true, Family: unix.AF_INET, Protocol: unix.IPPROTO_TCP,
		Remote: decode.Addr{Valid: true, Family: decode.AFInet, IP: f.dst}}
}

// sink gives the netns a destination that never answers, once: a veth
// whose peer drops what is sent to it (a permanent neighbour entry with
// another MAC address), so a SYN toward 10.77.0.2 goes out, nothing comes
// back (no reset, no ICMP error that would end the connect and free its
// port), and its port stays taken until the socket is closed.
func (f *fixNetns) sink(t *testing.T) netip.AddrPort {
	t.Helper()
	dst := netip.MustParseAddrPort("10.77.0.2:80")
	if f.sinkUp {
		return dst
	}
	ip := testenv.Program(t, "ip", "iproute2")
	for _, args := range [][]string{{"link", "add", "fx0", "type", "veth", "peer", "name", "fx1"},
		{"link", "set", "fx1", "up"}, {"link", "set", "fx0", "up"}, {"addr", "add", "10.77.0.1/24", "dev", "fx0"},
		{"neigh", "add", "10.77.0.2", "lladdr", "02:00:00:00:00:02", "dev", "fx0", "nud", "permanent"}} {
		cmd := exec.Command(ip, args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := f.ns.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out.String())
		}
	}
	f.sinkUp = true
	return dst
}
