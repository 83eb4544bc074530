package nodeport

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestReadWithoutNetAdmin: without CAP_NET_ADMIN no netlink source can be
// read: each says why (EPERM) and Read fails instead of handing on an empty
// table that would read as "no NodePort rule".
func TestReadWithoutNetAdmin(t *testing.T) {
	testenv.RequireRoot(t)
	type result struct {
		tab *Table
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Capabilities are per thread: drop CAP_NET_ADMIN from this one
		// only, and never unlock it, so Go ends the thread with the
		// goroutine instead of reusing it.
		runtime.LockOSThread()
		if err := dropNetAdmin(); err != nil {
			ch <- result{err: err}
			return
		}
		tab, err := Read()
		ch <- result{tab, err}
	}()
	r := <-ch
	if r.err == nil {
		t.Fatalf("Read without CAP_NET_ADMIN: %s, want an error", r.tab)
	}
	t.Logf("Read without CAP_NET_ADMIN: %v", r.err)
	msg := r.err.Error()
	if !errors.Is(r.err, unix.EPERM) || !strings.Contains(msg, "nftables: ") || !strings.Contains(msg, "iptables: ") {
		t.Errorf("error %q, want EPERM named for the nftables and iptables sources", msg)
	}
}

// dropNetAdmin drops CAP_NET_ADMIN from the calling thread's effective set
// (locked by the caller, and never unlocked).
func dropNetAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
	return unix.Capset(&hdr, &data[0])
}

// TestConntrackWithoutNetAdmin: CTNETLINK refuses a thread without
// CAP_NET_ADMIN; the counters and the table's use come from /proc then,
// the same figures: the lab's node after pod 1's SYN was dropped at SNAT.
func TestConntrackWithoutNetAdmin(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40003})
	l.Hold(t, 0, 4, 4)
	l.Pods[1].Do(func() error {
		c, err := net.DialTimeout("tcp", snatlab.ServerDst(4), 1500*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return nil
	})
	type figures struct {
		c          ConntrackCounters
		count, max uint64
		err        error
	}
	read := func(drop bool) (f figures) {
		f.err = l.Node.Do(func() error {
			if drop {
				// Locked once more than Do unlocks: the thread, without
				// CAP_NET_ADMIN, ends with Do's goroutine.
				runtime.LockOSThread()
				if err := dropNetAdmin(); err != nil {
					return err
				}
			}
			var err error
			if f.c, err = ReadConntrackCounters(); err != nil {
				return err
			}
			f.count, f.max, err = ConntrackUse()
			return err
		})
		return f
	}
	nl, proc := read(false), read(true)
	if nl.err != nil || proc.err != nil {
		t.Fatalf("netlink: %v; without CAP_NET_ADMIN: %v", nl.err, proc.err)
	}
	nl.c.Source, proc.c.Source = nl.c.Source+" "+proc.c.Source, nl.c.Source+" "+proc.c.Source
	if nl.c != proc.c || nl.count != proc.count || nl.max != proc.max || nl.c.InsertFailed == 0 || nl.c.Source != SourceCTNetlink+" "+SourceProcStat {
		t.Errorf("netlink %+v, /proc %+v; want the same, insert_failed moved, from each source", nl, proc)
	}
}
