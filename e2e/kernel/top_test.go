package kernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testns"
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
	ns := testns.New(t)
	eaddrtest.Sandbox(t, ns)
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
	return eaddrtest.SsCount(f.t, f.ns, "established", "127.0.0.1:8080", topLo, topHi)
}

func (f *filling) inode() string { return strconv.FormatUint(f.ns.Inode(), 10) }

// --once --output json: the test netns's used ports and ports in use are
// ss's count, with 200 usable; one sample has no trend and says why.
func TestTopOnceJSON(t *testing.T) {
	f := newFilling(t)
	f.add(37)
	cmd := exec.Command(eaddrtest.EaddrBin, "top", "--once", "--interval", "0", "-o", "json", "--netns", f.inode())
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

// topRow is a row of top's table.
type topRow struct {
	name, used, trend, eta string
}

var rowRe = regexp.MustCompile(`^(netns:\d+ \(\w+\)|host|\S+/\S+)\s+\S+\s+(\d+)/\d+\s+\[[#.]+\]\s+\d+%\s+(\S+)\s+(\S+)`)

// rows are the table's rows, in order.
func rows(screen string) []topRow {
	var out []topRow
	for _, l := range strings.Split(screen, "\n") {
		if m := rowRe.FindStringSubmatch(l); m != nil {
			out = append(out, topRow{m[1], m[2], m[3], m[4]})
		}
	}
	return out
}

func rowOf(screen, name string) (topRow, bool) {
	for _, r := range rows(screen) {
		if r.name == name {
			return r, true
		}
	}
	return topRow{}, false
}

// In a real terminal (tmux), eaddr top puts the netns that fills on top,
// above one that holds more ports but does not grow; its used count is
// ss's; p stops the numbers while connections are added; q quits and
// leaves the terminal as it was.
func TestTopTmux(t *testing.T) {
	filling, flat := newFilling(t), newFilling(t)
	flat.add(120)
	filling.add(10)
	name := "netns:" + filling.inode() + " (sleep)"
	cmd := fmt.Sprintf("%s top --interval 300ms --netns %s --netns %s 2>/dev/null; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 600",
		eaddrtest.EaddrBin, filling.inode(), flat.inode())
	p := eaddrtest.StartTmux(t, 200, 50, cmd)
	p.WaitFor("the filling netns on top with a time to exhaustion", func(s string) bool {
		r := rows(s)
		if len(r) == 2 && r[0].name == name && r[0].eta != "-" {
			return true
		}
		// Rising by 2 each time the screen shows the last rise, so that every
		// sample of top sees it grow, however fast this polls and however
		// late top draws its first table (idle, the rise once ended before
		// top's first samples: a flat netns, no time, 2 minutes waited).
		// Below the flat one's 120: on top by time to exhaustion, not by use.
		if now := filling.ss(); now < 60 {
			if r, ok := rowOf(s, name); ok && r.used == strconv.Itoa(now) {
				filling.add(2)
			}
		}
		return false
	})
	// nothing is added now: the row settles on ss's count
	want := filling.ss()
	p.WaitFor(fmt.Sprintf("%s using %d ports, as ss counts", name, want), func(s string) bool {
		r, ok := rowOf(s, name)
		return ok && r.used == strconv.Itoa(want)
	})
	p.Keys("p")
	s := p.WaitFor("PAUSED", func(s string) bool { return strings.Contains(s, "PAUSED") })
	paused, _ := rowOf(s, name)
	filling.add(15)
	// several intervals with more connections: the screen stays
	for range 10 {
		time.Sleep(300 * time.Millisecond)
		if r, ok := rowOf(p.Capture(), name); !ok || r != paused {
			t.Fatalf("paused, the row changed from %+v to %+v", paused, r)
		}
	}
	p.Keys("p")
	want = filling.ss()
	p.WaitFor(fmt.Sprintf("resumed, %d ports as ss counts", want), func(s string) bool {
		r, ok := rowOf(s, name)
		return !strings.Contains(s, "PAUSED") && ok && r.used == strconv.Itoa(want)
	})
	p.Keys("q")
	s = p.WaitFor("eaddr exiting", func(s string) bool { return strings.Contains(s, "EXITED") && strings.Contains(s, "echo") })
	if !strings.Contains(s, "EXITED 0") || strings.Contains(s, "eaddr top ") || !strings.Contains(s, "icanon echo") {
		t.Errorf("after q, the terminal is not as it was (cooked mode, the main screen):\n%s", s)
	}
}

// Failures the tracer sees in a netns show in its failures_per_second,
// after eaddr top attached it (its first snapshot is out).
func TestTopFailures(t *testing.T) {
	f := newFilling(t)
	f.add(topHi - topLo + 1) // every port of the range: the next connect() fails with EADDRNOTAVAIL
	cmd := exec.Command(eaddrtest.EaddrBin, "top", "--interval", "300ms", "-o", "json", "--netns", f.inode())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	failed := 0
	for lines.Scan() {
		var snap top.Snapshot
		if err := json.Unmarshal(lines.Bytes(), &snap); err != nil || len(snap.NetNS) != 1 {
			t.Fatalf("%v: %s", err, lines.Bytes())
		}
		r := snap.NetNS[0]
		if snap.FailuresUnknown != "" || r.FailuresPerSec == nil {
			t.Fatalf("failures not counted: %s", lines.Bytes())
		}
		if *r.FailuresPerSec > 0 {
			if failed == 0 || !r.Exhausted || r.SecondsToExhaustion == nil || *r.SecondsToExhaustion != 0 {
				t.Errorf("%d failures made; %s", failed, lines.Bytes())
			}
			return
		}
		if _, err := f.ns.Dial("tcp4", "127.0.0.1:8080"); err == nil {
			t.Fatal("a connect() in the full netns did not fail")
		}
		if failed++; failed == 300 { // 300 snapshots: a generous bound, not a measure
			t.Fatalf("%d failures made, none counted: %s", failed, lines.Bytes())
		}
	}
	t.Fatalf("eaddr top stopped before it counted the %d failures: %v", failed, lines.Err())
}
