package netdiag

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"golang.org/x/sys/unix"
)

// Lines captured from /proc/net on this machine (Linux 6.18, x86_64).
const (
	procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 0100007F:46A5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 209552 1 00000000a4a6d7c9 100 0 0 10 0                    
   1: 0100007F:A952 0100007F:46A5 06 00000000:00000000 03:00001765 00000000     0        0 0 3 00000000df95ee93                                      
   2: 0100007F:9B9E 0100007F:46A1 01 00000000:00000000 00:00000000 00000000  1000        0 210397 2 00000000d57b8b57 20 0 0 10 -1                    
`
	procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: B80D0120000000000000000002000100:46A4 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 209545 1 000000005c4b11ff 100 0 0 10 0
   1: B80D0120000000000000000002000100:D7CE B80D0120000000000000000002000100:46A4 06 00000000:00000000 03:00001760 00000000     0        0 0 3 00000000cb9c2040
   2: 0000000000000000FFFF00000100007F:46A1 0000000000000000FFFF00000100007F:9B9E 01 00000000:00000000 00:00000000 00000000     0        0 210398 1 00000000aba8ea30 20 0 0 10 -1
   3: 00000000000000000000000001000000:46A2 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 210399 1 00000000c8eb7ba1 100 0 0 10 0
`
	procUDP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
10922: 00000000000000000000000001000000:46A3 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 210400 2 00000000cbd7d98f 0
`
	procUnix = `Num       RefCount Protocol Flags    Type St Inode Path
00000000c7315a4e: 00000002 00000000 00010000 0001 01 211055 /tmp/diag l.sock
0000000031aa1be0: 00000002 00000000 00000000 0002 01 211058 /tmp/diag-d.sock
00000000f5add21d: 00000003 00000000 00000000 0001 03 211056
000000002f4a5ef2: 00000003 00000000 00000000 0001 03 211057 /tmp/diag l.sock
00000000306e1004: 00000002 00000000 00010000 0005 01 211059 @eaddr@x
`
)

func sock(family, proto, state uint8, local, remote string, inode uint64, uid uint32) Socket {
	return Socket{Family: family, Proto: proto, State: state, Local: netip.MustParseAddrPort(local),
		Remote: netip.MustParseAddrPort(remote), Inode: inode, UID: uid}
}

func TestParseProcNetInet(t *testing.T) {
	const tcp, udp, v4, v6 = unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.AF_INET, unix.AF_INET6
	for _, tc := range []struct {
		text          string
		family, proto uint8
		want          []Socket
	}{
		{procTCP, v4, tcp, []Socket{
			sock(v4, tcp, StateListen, "127.0.0.1:18085", "0.0.0.0:0", 209552, 0),
			sock(v4, tcp, StateTimeWait, "127.0.0.1:43346", "127.0.0.1:18085", 0, 0),
			sock(v4, tcp, StateEstablished, "127.0.0.1:39838", "127.0.0.1:18081", 210397, 1000),
		}},
		{procTCP6, v6, tcp, []Socket{
			sock(v6, tcp, StateListen, "[2001:db8::1:2]:18084", "[::]:0", 209545, 0),
			sock(v6, tcp, StateTimeWait, "[2001:db8::1:2]:55246", "[2001:db8::1:2]:18084", 0, 0),
			// v4 traffic on a dual-stack socket: unmapped, as sock_diag shows it.
			sock(v6, tcp, StateEstablished, "127.0.0.1:18081", "127.0.0.1:39838", 210398, 0),
			sock(v6, tcp, StateListen, "[::1]:18082", "[::]:0", 210399, 0),
		}},
		{procUDP6, v6, udp, []Socket{sock(v6, udp, StateClose, "[::1]:18083", "[::]:0", 210400, 0)}},
	} {
		got, err := ParseProcNetInet(strings.NewReader(tc.text), tc.family, tc.proto, nil)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseProcNetInet(%s):\n got %v %v\nwant %v", strings.SplitN(tc.text, "\n", 3)[1], fmtSocks(got), err, fmtSocks(tc.want))
		}
	}
	for _, bad := range []string{"hdr\n 0: 0100007F:46A5 00000000:0000 0A\n", "hdr\n 0: 0100007:46A5 00000000:0000 0A 0:0 0:0 0 0 0 1\n",
		"hdr\n 0: 0100007F 00000000:0000 0A 0:0 0:0 0 0 0 1\n", "hdr\n 0: 0100007F:46A5 00000000:0000 0A 0:0 0:0 0 x 0 1\n"} {
		if got, err := ParseProcNetInet(strings.NewReader(bad), unix.AF_INET, tcp, nil); err == nil {
			t.Errorf("ParseProcNetInet(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseProcNetUnix(t *testing.T) {
	got, err := ParseProcNetUnix(strings.NewReader(procUnix), nil)
	want := []UnixSocket{
		{Type: unix.SOCK_STREAM, State: StateListen, Inode: 211055, Name: "/tmp/diag l.sock"},
		{Type: unix.SOCK_DGRAM, State: StateClose, Inode: 211058, Name: "/tmp/diag-d.sock"},
		{Type: unix.SOCK_STREAM, State: StateEstablished, Inode: 211056},
		{Type: unix.SOCK_STREAM, State: StateEstablished, Inode: 211057, Name: "/tmp/diag l.sock"},
		{Type: unix.SOCK_SEQPACKET, State: StateListen, Inode: 211059, Name: "@eaddr@x"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseProcNetUnix:\n got %+v %v\nwant %+v", got, err, want)
	}
}

// The /proc/net fallback gives the same sockets as sock_diag on the same
// real sockets: TCP v4 and v6 in every common state, v4 on a dual-stack
// socket, UDP.
func TestDumpSocketsProcFallback(t *testing.T) {
	ns, n := sandbox(t)
	py := `import socket, time
l6 = socket.socket(socket.AF_INET6); l6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0); l6.bind(("::", 8081)); l6.listen()
keep = []
for i in range(3):
    c = socket.socket(); c.connect(("127.0.0.1", 8081)); a, _ = l6.accept(); keep += [c, a]
c = socket.socket(socket.AF_INET6); c.connect(("::1", 8081)); a, _ = l6.accept(); c.close(); time.sleep(0.02); a.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 5353))
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u6.connect(("::1", 53))
print("ready", flush=True)
time.sleep(60)
`
	startReady(t, ns, "python3", "-c", py)
	netlink := dump(t, n, true)
	var logged strings.Builder
	SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { SetLogger(nil) })
	TestingNoSockDiag.Store(true)
	t.Cleanup(func() { TestingNoSockDiag.Store(false) })
	proc := dump(t, n, true)
	dump(t, n, false)
	TestingNoSockDiag.Store(false)
	if strings.Count(logged.String(), "\n") != 1 || !strings.Contains(logged.String(), "fix=\"modprobe inet_diag tcp_diag udp_diag\"") {
		t.Errorf("want one log line with the fix, got %q", logged.String())
	}
	sortSocks(netlink)
	sortSocks(proc)
	t.Logf("netlink: %s", fmtSocks(netlink))
	if len(netlink) != 10 || !slices.Equal(netlink, proc) {
		t.Errorf("/proc/net fallback differs from sock_diag (want 10 sockets):\nnetlink %s\n   proc %s", fmtSocks(netlink), fmtSocks(proc))
	}
}

func sortSocks(s []Socket) {
	slices.SortFunc(s, func(a, b Socket) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
}

// startReady starts argv in ns and waits (5s at most) for it to print
// "ready"; it is killed at cleanup.
func startReady(t testing.TB, ns *netns.NS, argv ...string) *exec.Cmd {
	t.Helper()
	if argv[0] == "python3" {
		argv[0] = testenv.Program(t, "python3", "python3")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(cmd); err != nil {
		t.Fatalf("start %q: %v", argv[0], err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("%q printed %q, not ready", argv[0], line)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%q not ready within 5s", argv[0])
	}
	return cmd
}

// DumpUnix lists the bound unix sockets of the netns with their file's
// inode; a stale socket file (bound, closed, not unlinked) has none; the
// /proc/net/unix fallback lists the same sockets, without file inodes.
func TestDumpUnix(t *testing.T) {
	ns, n := sandbox(t)
	dir := t.TempDir()
	abstract := fmt.Sprintf("eaddr-test-%d", time.Now().UnixNano())
	py := fmt.Sprintf(`import socket, time, os
d = %q
l = socket.socket(socket.AF_UNIX); l.bind(d + "/l.sock"); l.listen()
c = socket.socket(socket.AF_UNIX); c.connect(d + "/l.sock"); a, _ = l.accept()
s = socket.socket(socket.AF_UNIX); s.bind(d + "/stale.sock"); s.close()
g = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); g.bind(d + "/d.sock")
b = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); b.bind(b"\0" + %q.encode()); b.listen()
print("ready", flush=True)
time.sleep(60)
`, dir, abstract)
	startReady(t, ns, "python3", "-c", py)
	socks, byName, err := n.DumpUnix()
	if err != nil || byName {
		t.Fatal(err, byName)
	}
	named := func(socks []UnixSocket, name string) []UnixSocket {
		var out []UnixSocket
		for _, s := range socks {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	stat := func(p string) (ino, dev uint64) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino, st.Dev
	}
	lino, ldev := stat(dir + "/l.sock")
	l := named(socks, dir+"/l.sock")
	if len(l) != 2 || l[0].VFSIno != lino || l[0].VFSDev != ldev || l[1].VFSIno != lino ||
		(l[0].State != StateListen && l[1].State != StateListen) || l[0].Type != unix.SOCK_STREAM {
		t.Errorf("listener and its accepted end: %+v; file ino %d dev %d", l, lino, ldev)
	}
	dino, _ := stat(dir + "/d.sock")
	if d := named(socks, dir+"/d.sock"); len(d) != 1 || d[0].VFSIno != dino || d[0].Type != unix.SOCK_DGRAM || d[0].State != StateClose {
		t.Errorf("datagram socket: %+v (file ino %d)", d, dino)
	}
	if a := named(socks, "@"+abstract); len(a) != 1 || a[0].VFSIno != 0 || a[0].State != StateListen || a[0].Type != unix.SOCK_SEQPACKET {
		t.Errorf("abstract listener: %+v", a)
	}
	if s := named(socks, dir+"/stale.sock"); len(s) != 0 {
		t.Errorf("stale socket file has a socket: %+v", s)
	}
	if _, err := os.Stat(dir + "/stale.sock"); err != nil {
		t.Errorf("stale socket file: %v", err)
	}
	TestingNoSockDiag.Store(true)
	t.Cleanup(func() { TestingNoSockDiag.Store(false) })
	proc, byName, err := n.DumpUnix()
	TestingNoSockDiag.Store(false)
	if err != nil || !byName {
		t.Fatal(err, byName)
	}
	for i := range socks {
		socks[i].VFSIno, socks[i].VFSDev = 0, 0
	}
	cmp := func(a, b UnixSocket) int { return int(a.Inode) - int(b.Inode) }
	slices.SortFunc(socks, cmp)
	slices.SortFunc(proc, cmp)
	if !slices.Equal(socks, proc) {
		t.Errorf("/proc/net/unix fallback differs:\nnetlink %+v\n   proc %+v", socks, proc)
	}
}

// unixMany starts a process in a fresh netns holding n bound unix sockets
// (half socket files in dir, half abstract names; every tenth listens).
func unixMany(t testing.TB, n int, dir string) *Netns {
	t.Helper()
	ns, h := sandbox(t)
	startReady(t, ns, "python3", "-c", fmt.Sprintf(`import socket, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (%[1]d + 64, %[1]d + 64))
keep = []
for i in range(%[1]d):
    s = socket.socket(socket.AF_UNIX)
    s.bind(%[2]q + "/s%%d.sock" %% i if i %% 2 else b"\0eaddr-bench-%%d" %% i)
    if i %% 10 == 0:
        s.listen()
    keep.append(s)
print("ready", flush=True)
import time; time.sleep(600)
`, n, dir))
	return h
}

// BenchmarkDumpInet2000 compares the sock_diag dump with the /proc/net
// fallback on 2001 TCP sockets (1000 connections and a listener).
func BenchmarkDumpInet2000(b *testing.B) {
	ns, n := sandbox(b)
	ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40999)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	b.Cleanup(func() { TestingNoSockDiag.Store(false) })
	for _, mode := range []string{"netlink", "procnet"} {
		b.Run(mode, func(b *testing.B) {
			TestingNoSockDiag.Store(mode == "procnet")
			var count int
			for b.Loop() {
				socks, err := n.DumpSockets(false)
				if err != nil {
					b.Fatal(err)
				}
				count = len(socks)
			}
			b.ReportMetric(float64(count), "sockets")
		})
	}
}

// BenchmarkDumpUnix2000 compares the unix sock_diag dump with the
// /proc/net/unix fallback on 2000 bound unix sockets.
func BenchmarkDumpUnix2000(b *testing.B) {
	n := unixMany(b, 2000, b.TempDir())
	b.Cleanup(func() { TestingNoSockDiag.Store(false) })
	for _, mode := range []string{"netlink", "procnet"} {
		b.Run(mode, func(b *testing.B) {
			TestingNoSockDiag.Store(mode == "procnet")
			var count int
			for b.Loop() {
				socks, _, err := n.DumpUnix()
				if err != nil {
					b.Fatal(err)
				}
				count = len(socks)
			}
			b.ReportMetric(float64(count), "sockets")
		})
	}
}

// The error of a dump the kernel has no handler for is what makes the
// fallback run: here for real, with raw sockets (CONFIG_INET_RAW_DIAG is
// not set on this kernel, as inet_diag and friends are missing elsewhere).
func TestNoHandlerIsReal(t *testing.T) {
	_, n := sandbox(t)
	err := n.ns.Do(func() error {
		d, err := openSockDiag()
		if err != nil {
			return err
		}
		defer d.close()
		return d.eachInetNetlink(unix.AF_INET, unix.IPPROTO_RAW, func(*Socket) {})
	})
	if err == nil {
		testenv.Skip(t, "this kernel can dump raw sockets (raw_diag): no family without a handler to try")
	}
	if !noHandler(err) {
		t.Errorf("a dump without a handler failed with %v, which noHandler does not take for one", err)
	}
}
