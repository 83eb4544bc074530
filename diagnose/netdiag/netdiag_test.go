package netdiag

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
	"golang.org/x/sys/unix"
)

// startIn starts argv inside ns; the process is killed and reaped at cleanup.
func startIn(t testing.TB, ns *netns.NS, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	if err := ns.Start(cmd); err != nil {
		t.Fatalf("start %q in %s: %v", argv, ns, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// sandbox returns a fresh netns with a "sleep 60" in it, playing a pod's
// sandbox process, and a Netns handle on it opened through that process.
func sandbox(t testing.TB) (*netns.NS, *Netns) {
	t.Helper()
	ns := testns.New(t)
	cmd := startIn(t, ns, "sleep", "60")
	n, err := OpenNetns(ns.Inode(), cmd.Process.Pid)
	if err != nil {
		t.Fatalf("OpenNetns(%d, %d): %v", ns.Inode(), cmd.Process.Pid, err)
	}
	t.Cleanup(func() { n.Close() })
	return ns, n
}

// dump calls DumpSockets and fails the test on error.
func dump(t testing.TB, n *Netns, udp bool) []Socket {
	t.Helper()
	socks, err := n.DumpSockets(udp)
	if err != nil {
		t.Fatalf("DumpSockets(%v): %v", udp, err)
	}
	return socks
}

// waitFor polls cond until it holds or 30s pass: a deadline to wait for
// what must happen (a server goroutine closing its side), generous for a
// busy machine or an emulated guest.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForSaying(t, what, cond, func() string { return "" })
}

// waitForSaying is waitFor, whose failure also says what seen() says of the
// state it last saw.
func waitForSaying(t testing.TB, what string, cond func() bool, seen func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last seen:%s", what, seen())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acceptAll accepts on l until it is closed; each accepted connection is read
// to EOF and then closed (so a client that closes first ends in TIME_WAIT), or
// closed at cleanup.
func acceptAll(t testing.TB, l net.Listener) {
	t.Helper()
	done := make(chan struct{})
	var conns []net.Conn
	connc := make(chan net.Conn)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connc <- c
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	collected := make(chan struct{})
	go func() {
		for c := range connc {
			conns = append(conns, c)
		}
		close(collected)
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		close(connc)
		<-collected
		for _, c := range conns {
			c.Close()
		}
	})
}

func fmtSocks(socks []Socket) string {
	var b strings.Builder
	for _, s := range socks {
		fmt.Fprintf(&b, "\n  fam=%d proto=%d %-12s %-22s %-22s inode=%d uid=%d",
			s.Family, s.Proto, StateName(s.State), s.Local, s.Remote, s.Inode, s.UID)
	}
	return b.String()
}

func TestStateName(t *testing.T) {
	for s, want := range map[uint8]string{
		1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
		6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
		11: "CLOSING", 12: "NEW_SYN_RECV", 0: "unknown:0", 13: "unknown:13", 255: "unknown:255",
	} {
		if got := StateName(s); got != want {
			t.Errorf("StateName(%d) = %q, want %q", s, got, want)
		}
	}
}

func TestOpenNetns(t *testing.T) {
	ns := testns.New(t)
	sleep := startIn(t, ns, "sleep", "60")
	pid := sleep.Process.Pid

	// No hints: the /proc scan finds the sandbox process.
	n, err := OpenNetns(ns.Inode())
	if err != nil {
		t.Fatalf("OpenNetns without hints: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	if n.PID() != pid || n.Inode() != ns.Inode() {
		t.Errorf("OpenNetns: pid %d inode %d, want pid %d inode %d", n.PID(), n.Inode(), pid, ns.Inode())
	}

	// Bogus hints: pid 1 (another netns), a pid that cannot exist, 0, -1.
	n2, err := OpenNetns(ns.Inode(), 1, 1<<30, 0, -1)
	if err != nil {
		t.Fatalf("OpenNetns with bogus hints: %v", err)
	}
	t.Cleanup(func() { n2.Close() })
	if n2.PID() != pid || n2.Inode() != ns.Inode() {
		t.Errorf("OpenNetns with bogus hints: pid %d inode %d, want pid %d inode %d", n2.PID(), n2.Inode(), pid, ns.Inode())
	}

	// The handle really is in that namespace: the fd's inode matches, and
	// a listener created through ns shows up in its dump.
	var st unix.Stat_t
	if err := unix.Stat(procPath(pid, "ns/net"), &st); err != nil || st.Ino != n.Inode() {
		t.Errorf("stat /proc/%d/ns/net: inode %d, %v; handle says %d", pid, st.Ino, err, n.Inode())
	}
	l, err := ns.Listen("tcp4", "127.0.0.1:7070")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if socks := dump(t, n2, false); len(socks) != 1 || socks[0].Local.String() != "127.0.0.1:7070" {
		t.Errorf("dump through the handle: %s\nwant only the listener on 127.0.0.1:7070", fmtSocks(socks))
	}

	// A namespace nobody is in cannot be opened.
	empty := testns.New(t)
	if n3, err := OpenNetns(empty.Inode(), pid, 1); err == nil {
		n3.Close()
		t.Errorf("OpenNetns of a netns without processes succeeded (pid %d)", n3.PID())
	} else if !errors.Is(err, ErrNoProcess) {
		t.Errorf("OpenNetns of a netns without processes: %v, want ErrNoProcess", err)
	} else {
		t.Logf("OpenNetns of an empty netns: %v", err)
	}

	// Once the sandbox process is gone, the netns cannot be reached any more,
	// but the handle opened earlier keeps working.
	sleep.Process.Kill()
	sleep.Wait()
	ns.Close()
	if n4, err := OpenNetns(ns.Inode(), pid); err == nil {
		n4.Close()
		t.Errorf("OpenNetns after the last process exited succeeded (pid %d)", n4.PID())
	}
	if socks := dump(t, n, false); len(socks) != 1 {
		t.Errorf("dump through a handle that outlived its process: %s", fmtSocks(socks))
	}
}

// ssName maps a kernel TCP state to the name ss prints.
func ssName(s Socket) string {
	if s.Proto == unix.IPPROTO_UDP {
		switch s.State {
		case StateEstablished:
			return "ESTAB"
		case StateClose:
			return "UNCONN"
		}
	}
	return map[uint8]string{
		1: "ESTAB", 2: "SYN-SENT", 3: "SYN-RECV", 4: "FIN-WAIT-1", 5: "FIN-WAIT-2",
		6: "TIME-WAIT", 7: "UNCONN", 8: "CLOSE-WAIT", 9: "LAST-ACK", 10: "LISTEN",
		11: "CLOSING", 12: "SYN-RECV",
	}[s.State]
}

// compareWithSS runs ss with args inside ns and checks that it sees as many
// sockets per state as socks.
func compareWithSS(t *testing.T, ns *netns.NS, socks []Socket, args ...string) {
	t.Helper()
	path := testenv.Program(t, "ss", "iproute2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...) // a hung ss fails the test, not the run
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ss %v: %v\n%s", args, err, out.Bytes())
	}
	ssCount := map[string]int{}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) > 0 {
			ssCount[f[0]]++
		}
	}
	ours := map[string]int{}
	for _, s := range socks {
		ours[ssName(s)]++
	}
	if fmt.Sprint(ours) != fmt.Sprint(ssCount) {
		t.Errorf("per-state counts differ:\n ours %v\n ss   %v\nss %v output:\n%s\nours:%s", ours, ssCount, args, out.Bytes(), fmtSocks(socks))
	} else {
		t.Logf("ss %s agrees: %v", strings.Join(args, " "), ours)
	}
}

func TestDumpSocketsExhausted(t *testing.T) {
	ns, n := sandbox(t)
	ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })

	socks := dump(t, n, false)
	srv := netip.MustParseAddrPort("127.0.0.1:8080")
	var listen, clients, servers []Socket
	for _, s := range socks {
		if s.Family != unix.AF_INET || s.Proto != unix.IPPROTO_TCP {
			t.Errorf("unexpected family/proto: %+v", s)
		}
		switch {
		case s.State == StateListen && s.Local == srv:
			listen = append(listen, s)
		case s.State == StateEstablished && s.Remote == srv:
			clients = append(clients, s)
		case s.State == StateEstablished && s.Local == srv:
			servers = append(servers, s)
		}
	}
	if len(listen) != 1 || len(clients) != 2 || len(servers) != 2 || len(socks) != 5 {
		t.Fatalf("want 1 LISTEN on %v, 2 client and 2 server ESTABLISHED, nothing else; got%s", srv, fmtSocks(socks))
	}
	var ports []int
	for _, c := range clients {
		ports = append(ports, int(c.Local.Port()))
		if c.Local.Addr() != srv.Addr() || c.Inode == 0 || c.UID != 0 {
			t.Errorf("client socket %+v: want local 127.0.0.1, an inode, uid 0", c)
		}
	}
	sort.Ints(ports)
	if !slices.Equal(ports, []int{40000, 40001}) {
		t.Errorf("client local ports %v, want [40000 40001]", ports)
	}
	if listen[0].Inode == 0 {
		t.Errorf("listener without inode: %+v", listen[0])
	}
	compareWithSS(t, ns, socks, "-tanH")
}

func TestDumpSocketsTimeWait(t *testing.T) {
	ns, n := sandbox(t)
	if err := ns.SetSysctl("net.ipv4.tcp_tw_reuse", "0"); err != nil {
		t.Fatal(err)
	}
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", "41000 41999"); err != nil {
		t.Fatal(err)
	}
	// A reset ends a TIME_WAIT unless tcp_rfc1337 is 1
	// (tcp_timewait_state_process), and loopback sends one now and then: a
	// server's segment delivered late, after the server's socket is gone,
	// reaches the client's TIME_WAIT, which answers with an ACK, which the
	// listener answers with a reset (the tcp:tcp_send_reset tracepoint:
	// reason TCP_FLAGS from the LISTEN socket, once in 100 to 300 runs
	// beside two busy loops). The test replays the server's FINs to make
	// that happen each run, and keeps its TIME_WAITs by RFC 1337's rule.
	if err := ns.SetSysctl("net.ipv4.tcp_rfc1337", "1"); err != nil {
		t.Fatal(err)
	}
	if sc, err := n.Sysctls(); err != nil || sc.TCPTWReuse != 0 {
		t.Fatalf("Sysctls: %+v, %v; want TCPTWReuse 0", sc, err)
	}
	l, err := ns.Listen("tcp4", "127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l)
	late := captureFINs(t, ns, 8081)
	for range 2 {
		c, err := ns.Dial("tcp4", "127.0.0.1:8081")
		if err != nil {
			t.Fatal(err)
		}
		c.Close() // client closes first: the client side ends in TIME_WAIT
	}
	var tw []Socket
	var socks []Socket
	timeWaits := func() bool {
		socks = dump(t, n, false)
		tw = tw[:0]
		for _, s := range socks {
			if s.State == StateTimeWait && s.Remote.Port() == 8081 {
				tw = append(tw, s)
			}
		}
		return len(tw) == 2
	}
	seen := func() string { return fmtSocks(socks) + tcpEnds(t, ns) }
	// The clients' TIME_WAITs and the server's sockets gone (its side
	// leaves LAST_ACK on its own time; CI, 6.12 guest, two busy loops:
	// once 30 s without them), then the late FINs and their resets.
	waitForSaying(t, "the 2 clients' TIME_WAIT sockets, the server's closed", func() bool {
		return timeWaits() && len(socks) == 3
	}, seen)
	rsts := tcpCounter(t, ns, "OutRsts")
	if got := late.replay(t); got < 2 {
		t.Fatalf("the server sent %d FINs, want 2 or more", got)
	}
	waitForSaying(t, "a reset for each late FIN", func() bool { return tcpCounter(t, ns, "OutRsts") >= rsts+2 }, seen)
	if !timeWaits() {
		t.Fatalf("want the 2 clients' TIME_WAIT sockets kept after the resets; got%s", seen())
	}
	for _, s := range tw {
		p := s.Local.Port()
		if p < 41000 || p > 41999 || s.Remote.String() != "127.0.0.1:8081" || s.Inode != 0 {
			t.Errorf("TIME_WAIT socket %+v: want local port in 41000-41999, remote 127.0.0.1:8081, inode 0", s)
		}
	}
	t.Logf("after the clients closed first and the server's FINs came again:%s", fmtSocks(socks))
}

func TestDumpSocketsIPv6(t *testing.T) {
	ns, n := sandbox(t)
	l6, err := ns.Listen("tcp6", "[::1]:8082")
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l6)
	c6, err := ns.Dial("tcp6", "[::1]:8082")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c6.Close() })

	// A dual-stack listener (AF_INET6, IPV6_V6ONLY=0) reached over IPv4: its
	// accepted socket is AF_INET6 with v4-mapped addresses, shown unmapped.
	ld, err := ns.Listen("tcp", ":8083")
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, ld)
	c4, err := ns.Dial("tcp4", "127.0.0.1:8083")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c4.Close() })

	var socks []Socket
	find := func(state uint8, fam uint8, local, remote string) bool {
		for _, s := range socks {
			if s.State == state && s.Family == fam && s.Local.String() == local && (remote == "" || s.Remote.String() == remote) {
				return true
			}
		}
		return false
	}
	c4port := strconv.Itoa(c4.LocalAddr().(*net.TCPAddr).Port)
	c6port := strconv.Itoa(c6.LocalAddr().(*net.TCPAddr).Port)
	waitFor(t, "the server sides to be established", func() bool {
		socks = dump(t, n, false)
		return find(StateEstablished, unix.AF_INET6, "[::1]:8082", "[::1]:"+c6port) &&
			find(StateEstablished, unix.AF_INET6, "127.0.0.1:8083", "127.0.0.1:"+c4port)
	})
	for _, w := range []struct {
		state         uint8
		fam           uint8
		local, remote string
	}{
		{StateListen, unix.AF_INET6, "[::1]:8082", "[::]:0"},
		{StateEstablished, unix.AF_INET6, "[::1]:" + c6port, "[::1]:8082"},
		{StateListen, unix.AF_INET6, "[::]:8083", "[::]:0"},
		{StateEstablished, unix.AF_INET, "127.0.0.1:" + c4port, "127.0.0.1:8083"},
	} {
		if !find(w.state, w.fam, w.local, w.remote) {
			t.Errorf("missing %s family %d %s -> %s", StateName(w.state), w.fam, w.local, w.remote)
		}
	}
	t.Logf("sockets:%s", fmtSocks(socks))
	compareWithSS(t, ns, socks, "-tanH")
}

func TestDumpSocketsUDP(t *testing.T) {
	ns, n := sandbox(t)
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp4", "127.0.0.1:9998")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c, err := ns.Dial("udp4", "127.0.0.1:9998") // connected UDP socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c6, err := ns.Dial("udp6", "[::1]:9997")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c6.Close() })

	if socks := dump(t, n, false); len(socks) != 0 {
		t.Errorf("DumpSockets(false) reports UDP sockets:%s", fmtSocks(socks))
	}
	socks := dump(t, n, true)
	cport := c.LocalAddr().(*net.UDPAddr).Port
	var connected, unconnected, connected6 bool
	for _, s := range socks {
		if s.Proto != unix.IPPROTO_UDP {
			t.Errorf("non-UDP socket: %+v", s)
		}
		switch {
		case s.State == StateEstablished && s.Family == unix.AF_INET && int(s.Local.Port()) == cport && s.Remote.String() == "127.0.0.1:9998":
			connected = true
		case s.State == StateClose && s.Family == unix.AF_INET && s.Local.String() == "127.0.0.1:9998" && s.Remote.Port() == 0:
			unconnected = true
		case s.State == StateEstablished && s.Family == unix.AF_INET6 && s.Remote.String() == "[::1]:9997":
			connected6 = true
		}
	}
	if !connected || !unconnected || !connected6 || len(socks) != 3 {
		t.Errorf("want a connected UDP socket (state 1) to 127.0.0.1:9998 and [::1]:9997 and an unconnected one (state 7) on 127.0.0.1:9998; got%s", fmtSocks(socks))
	}
	t.Logf("UDP sockets:%s", fmtSocks(socks))
	compareWithSS(t, ns, socks, "-uanH")
}

func TestSysctls(t *testing.T) {
	ns, n := sandbox(t)
	for name, v := range map[string]string{
		"net.ipv4.ip_local_port_range":        "40000 40001",
		"net.ipv4.ip_local_reserved_ports":    "40001",
		"net.ipv4.ip_unprivileged_port_start": "900",
		"net.ipv4.tcp_tw_reuse":               "1",
	} {
		if err := ns.SetSysctl(name, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := n.Sysctls()
	if err != nil {
		t.Fatal(err)
	}
	want := PortSysctls{RangeLo: 40000, RangeHi: 40001, Reserved: []PortSpan{{40001, 40001}}, UnprivilegedStart: 900, TCPTWReuse: 1}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("Sysctls = %+v, want %+v", s, want)
	}
	if s.Usable() != 1 || !s.IsReserved(40001) || s.IsReserved(40000) {
		t.Errorf("Usable %d (want 1), IsReserved(40001) %v (want true), IsReserved(40000) %v (want false)",
			s.Usable(), s.IsReserved(40001), s.IsReserved(40000))
	}
	// The host's values are not affected.
	host, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil && strings.Join(strings.Fields(string(host)), " ") == "40000 40001" {
		t.Errorf("host range is 40000 40001 too?")
	}
}

func TestParseReserved(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []PortSpan
		bad  bool
	}{
		{in: "", want: nil},
		{in: "\n", want: nil},
		{in: "8080", want: []PortSpan{{8080, 8080}}},
		{in: "30000-32767,40000\n", want: []PortSpan{{30000, 32767}, {40000, 40000}}},
		{in: "0,65535,1-2", want: []PortSpan{{0, 0}, {65535, 65535}, {1, 2}}},
		{in: "8080, 9090", want: []PortSpan{{8080, 8080}, {9090, 9090}}},
		{in: "abc", bad: true},
		{in: "8080,", bad: true},
		{in: ",8080", bad: true},
		{in: "65536", bad: true},
		{in: "-1", bad: true},
		{in: "+80", bad: true},
		{in: "200-100", bad: true},
		{in: "1-2-3", bad: true},
		{in: "100-", bad: true},
		{in: "8080 9090", bad: true},
		{in: "99999999999999999999", bad: true},
	} {
		got, err := ParseReserved(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseReserved(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseReserved(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestUsable(t *testing.T) {
	for _, tc := range []struct {
		s    PortSysctls
		want int
	}{
		{PortSysctls{RangeLo: 32768, RangeHi: 60999}, 28232},
		{PortSysctls{RangeLo: 40000, RangeHi: 40001, Reserved: []PortSpan{{40001, 40001}}}, 1},
		{PortSysctls{RangeLo: 40000, RangeHi: 40001, Reserved: []PortSpan{{1, 65535}}}, 0},
		{PortSysctls{RangeLo: 100, RangeHi: 199, Reserved: []PortSpan{{150, 160}, {90, 100}, {155, 170}, {199, 300}}}, 100 - 1 - 21 - 1},
		{PortSysctls{RangeLo: 10, RangeHi: 9}, 0},
	} {
		if got := tc.s.Usable(); got != tc.want {
			t.Errorf("%+v.Usable() = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestAddrs(t *testing.T) {
	_, n := sandbox(t)
	addrs, err := n.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"127.0.0.1/8", "::1/128"} {
		if !slices.Contains(addrs, netip.MustParsePrefix(w)) {
			t.Errorf("Addrs() = %v, missing %s", addrs, w)
		}
	}
	if len(addrs) != 2 {
		t.Errorf("Addrs() = %v, want only the loopback addresses", addrs)
	}
}

func TestHolders(t *testing.T) {
	ns, n := sandbox(t)
	py := testenv.Program(t, "python3", "python3")
	cmd := startIn(t, ns, py, "-c",
		`import socket,time; s=socket.socket(); s.bind(("127.0.0.1",9090)); s.listen(); time.sleep(60)`)
	var pyInode uint64
	waitFor(t, "python3 to listen on 127.0.0.1:9090", func() bool {
		for _, s := range dump(t, n, false) {
			if s.State == StateListen && s.Local.String() == "127.0.0.1:9090" {
				pyInode = s.Inode
				return true
			}
		}
		return false
	})

	// A socket of the netns held by this test process, which is outside it.
	l, err := ns.Listen("tcp4", "127.0.0.1:9091")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var selfInode uint64
	for _, s := range dump(t, n, false) {
		if s.Local.String() == "127.0.0.1:9091" {
			selfInode = s.Inode
		}
	}
	if selfInode == 0 {
		t.Fatal("listener on 127.0.0.1:9091 not in the dump")
	}

	// No budget where the answer is checked: how far a scan gets in 300 ms
	// is the machine's; the budget itself is checked last.
	start := time.Now()
	got := n.Holders(map[uint64]bool{pyInode: true}, 0)
	t.Logf("Holders (netns phase only): %v in %v", got, time.Since(start))
	if want := []Proc{{cmd.Process.Pid, "python3"}}; !slices.Equal(got[pyInode], want) || len(got) != 1 {
		t.Errorf("Holders(python3's socket) = %v, want %d: %v", got, pyInode, want)
	}

	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	got = n.Holders(map[uint64]bool{pyInode: true, selfInode: true, 0: true}, 0)
	t.Logf("Holders (both phases): %v in %v", got, time.Since(start))
	if want := []Proc{{os.Getpid(), strings.TrimSpace(string(self))}}; !slices.Equal(got[selfInode], want) {
		t.Errorf("Holders(test process's socket) = %v, want %v", got[selfInode], want)
	}
	if len(got[pyInode]) != 1 || len(got) != 2 {
		t.Errorf("Holders = %v, want python3 and this process only", got)
	}

	// An inode nobody holds stays unresolved after a full scan.
	start = time.Now()
	got = n.Holders(map[uint64]bool{1<<40 + 1: true}, 0)
	t.Logf("Holders (unknown inode, full scan): %v in %v", got, time.Since(start))
	if len(got) != 0 {
		t.Errorf("Holders(unknown inode) = %v", got)
	}
	// The budget stops the scan: one that is over before the first look
	// (listing /proc alone takes longer than 1 ns) finds not even python3,
	// which the unbounded scan above found first.
	if got := n.Holders(map[uint64]bool{pyInode: true}, time.Nanosecond); len(got) != 0 {
		t.Errorf("Holders with a budget already spent = %v, want nothing: the budget is not kept", got)
	}
	if got := n.Holders(nil, time.Second); len(got) != 0 {
		t.Errorf("Holders(nil) = %v", got)
	}
}

// manySockets builds a netns holding 500 connections to one listener (1001
// TCP sockets) and returns a handle on it.
func manySockets(t testing.TB) *Netns {
	t.Helper()
	ns, n := sandbox(t)
	ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40499)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return n
}

func TestDumpSocketsTiming(t *testing.T) {
	n := manySockets(t)
	var times []time.Duration
	var socks []Socket
	for range 20 {
		start := time.Now()
		socks = dump(t, n, true)
		times = append(times, time.Since(start))
	}
	if len(socks) != 1001 {
		t.Errorf("DumpSockets: %d sockets, want 1001", len(socks))
	}
	slices.Sort(times)
	t.Logf("DumpSockets(udp=true) of %d sockets: min %v, median %v, max %v (20 runs)",
		len(socks), times[0], times[len(times)/2], times[len(times)-1])

	inodes := map[uint64]bool{}
	for _, s := range socks {
		inodes[s.Inode] = true
	}
	start := time.Now()
	h := n.Holders(inodes, 300*time.Millisecond)
	t.Logf("Holders of %d inodes: %d resolved in %v", len(inodes), len(h), time.Since(start))
}

func BenchmarkDumpSockets(b *testing.B) {
	n := manySockets(b)
	var count int
	for b.Loop() {
		socks, err := n.DumpSockets(false)
		if err != nil {
			b.Fatal(err)
		}
		count = len(socks)
	}
	b.ReportMetric(float64(count), "sockets")
}

// TestNetnsOpen checks netns.Open, on which OpenNetns is built.
func TestNetnsOpen(t *testing.T) {
	ns := testns.New(t)
	sleep := startIn(t, ns, "sleep", "60")
	o, err := netns.Open(procPath(sleep.Process.Pid, "ns/net"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	if o.Inode() != ns.Inode() {
		t.Errorf("Open: inode %d, want %d", o.Inode(), ns.Inode())
	}
	if err := o.SetSysctl("net.ipv4.ip_local_port_range", "45000 45009"); err != nil {
		t.Fatal(err)
	}
	if v, err := ns.Sysctl("net.ipv4.ip_local_port_range"); err != nil || strings.Join(strings.Fields(v), " ") != "45000 45009" {
		t.Errorf("range set through the opened NS, read through the original: %q, %v", v, err)
	}
	for _, p := range []string{"/proc/self/ns/uts", "/etc/hostname", "/nonexistent"} {
		if o2, err := netns.Open(p); err == nil {
			o2.Close()
			t.Errorf("netns.Open(%s) succeeded", p)
		}
	}
	// Close closes only the fd: the namespace and its process live on.
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ns.Sysctl("net.ipv4.ip_local_port_range"); err != nil {
		t.Errorf("original NS after closing the opened one: %v", err)
	}
	if err := sleep.Process.Signal(unix.Signal(0)); err != nil {
		t.Errorf("sandbox process after Close: %v", err)
	}
}
