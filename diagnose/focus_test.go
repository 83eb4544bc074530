package diagnose

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/portmodel"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// A connect()'s snapshot keeps the sockets toward its destination, the
// listeners, and one other socket a port (of each bucket kind): the model
// gives the same answer from it as from every socket, with the sockets read
// by sock_diag and by the BPF iterators, and the snapshot leaves out the
// server's accepted sockets but one.
func TestFocusedSnapshotSameModel(t *testing.T) {
	ns := rangedNS(t, 40000, 40019)
	var dials []net.Conn
	t.Cleanup(func() {
		for _, c := range dials {
			c.Close()
		}
	})
	for i, n := range []int{9, 6} { // toward 127.0.0.1:8080 and :8081
		l, err := ns.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", 8080+i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		for range n {
			c, err := ns.Dial("tcp4", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			dials = append(dials, c)
		}
	}
	err := ns.Do(func() error { // a socket only bound to a port of the range
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		t.Cleanup(func() { unix.Close(fd) })
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, ns)
	readers := map[string]netdiag.SocketReader{"sock_diag": nil}
	if it, err := tracer.NewSockIter(); err == nil {
		t.Cleanup(func() { it.Close() })
		readers["iterator"] = it
	} else if os.Getenv(testenv.RequireEnv) == "1" {
		t.Fatal(err)
	}
	dst := netip.MustParseAddrPort("127.0.0.1:8080")
	for name, it := range readers {
		n, err := netdiag.OpenNetns(ns.Inode())
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		all, err := readPorts(n, it, false, focus{all: true})
		if err != nil {
			t.Fatal(err)
		}
		kept, err := readPorts(n, it, false, focus{dst: dst})
		if err != nil {
			t.Fatal(err)
		}
		src := netip.MustParseAddr("127.0.0.1")
		a, k := portmodel.Connect(all.sc, all.socks, src, dst), portmodel.Connect(kept.sc, kept.socks, src, dst)
		if fmt.Sprint(a.Tried, a.Free, a.HeldForAll, a.FourTuple, a.TWReusable, a.SomeCalls, a.Unsure, a.Exhausted) !=
			fmt.Sprint(k.Tried, k.Free, k.HeldForAll, k.FourTuple, k.TWReusable, k.SomeCalls, k.Unsure, k.Exhausted) || a.FourTuple != 9 {
			t.Errorf("%s: from every socket %+v\nfrom the snapshot's %+v", name, a, k)
		}
		// 9 + 6 connections, 15 accepted on two ports, 2 listeners, 1 bound:
		// the accepted ones of each listener's port but one are left out.
		if len(kept.socks) != len(all.socks)-13 || kept.cut != 0 {
			t.Errorf("%s: the snapshot kept %d of %d sockets (cut %d), want all but 13", name, len(kept.socks), len(all.socks), kept.cut)
		}
	}
}

// A snapshot that left sockets out never says the ports are free: it says
// it cannot tell, and how many it read.
func TestCutSnapshotCannotTell(t *testing.T) {
	p := &portScene{sc: portmodel.Sysctls{Lo: 40000, Hi: 40009}, socks: make([]portmodel.Socket, 3), cut: 7}
	g := &Diagnosis{}
	r := portmodel.Result{Tried: 10, Free: 4, FourTuple: 6}
	NewDiagnoser().portVerdict(g, p, r, nil, "toward 10.0.0.1:80")
	if g.Cause != CauseUnsure || !strings.Contains(g.Verdict, "cannot tell") || !strings.Contains(g.Verdict, "it read 3 and left 7") {
		t.Errorf("cause %q, verdict %q", g.Cause, g.Verdict)
	}
}
