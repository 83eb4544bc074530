package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
	"github.com/eaddr/eaddr/top"
)

// topRange is the test netns's ip_local_port_range: 200 ports.
const topLo, topHi = 40000, 40199

// filling is a test netns with a listener on 127.0.0.1:8080 (outside its
// port range) and connections to it, which hold ports of the range.
type filling struct {
	t     *testing.T
	ns    *netns.NS
	mu    sync.Mutex
	conns []net.Conn
}

func newFilling(t *testing.T) *filling {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	sandbox(t, ns)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", topLo, topHi)); err != nil {
		t.Fatal(err)
	}
	ln, err := ns.Listen("tcp4", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	f := &filling{t: t, ns: ns}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return f
}

// add opens n more connections.
func (f *filling) add(n int) {
	f.t.Helper()
	for range n {
		c, err := f.ns.Dial("tcp4", "127.0.0.1:8080")
		if err != nil {
			f.t.Fatal(err)
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
	}
}

// ss is the connections toward the listener, as ss counts them.
func (f *filling) ss() int {
	return ssCount(f.t, f.ns, "established", "127.0.0.1:8080", topLo, topHi)
}

func (f *filling) inode() string { return strconv.FormatUint(f.ns.Inode(), 10) }

// --once --output json: the test netns's used ports and ports in use are
// ss's count, with 200 usable; one sample has no trend and says why.
func TestTopOnceJSON(t *testing.T) {
	f := newFilling(t)
	f.add(37)
	cmd := exec.Command(eaddrBin, "top", "--once", "--interval", "0", "-o", "json", "--netns", f.inode())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("eaddr top --once: %v", err)
	}
	want := f.ss()
	t.Logf("one sample of 1 netns with %d sockets, and the tracer attached: %v CPU (user %v, sys %v), the process's start included",
		want, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime(), cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime())
	var snap top.Snapshot
	if err := json.Unmarshal(out, &snap); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(snap.NetNS) != 1 {
		t.Fatalf("%d netns, want 1: %s", len(snap.NetNS), out)
	}
	r := snap.NetNS[0]
	if want != 37 || r.Used == nil || *r.Used != want || r.InUse == nil || *r.InUse != want || r.Usable == nil || *r.Usable != 200 ||
		r.Destination != "127.0.0.1:8080" || r.TrendPerMin != nil || r.TrendUnknown == "" || r.SecondsToExhaustion != nil {
		t.Errorf("ss counts %d; eaddr top says %s", want, out)
	}
}
