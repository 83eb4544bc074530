package diagnose

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/diagnose/nodeport"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestDropBook: drops kept by flow, at most max (the oldest go first);
// the counters' moves summed over the drops read with a read before them
// (the first drop in a netns has none); a v4-mapped address found as v4;
// the missed drops' time; an unreachable netns not searched per drop.
func TestDropBook(t *testing.T) {
	testenv.RequireRoot(t)
	host, err := netdiag.HostInode()
	if err != nil {
		t.Fatal(err)
	}
	b := NewDropBook(2)
	defer b.Close()
	var reads uint64
	b.Counters = func() (nodeport.ConntrackCounters, error) {
		reads++
		return nodeport.ConntrackCounters{InsertFailed: 10 * reads, Drop: 10 * reads}, nil
	}
	var missed uint64
	b.Missed = func() uint64 { return missed }
	flow := func(port uint16) decode.Flow {
		return decode.Flow{Proto: 6, Src: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), port), Dst: netip.MustParseAddrPort("192.0.2.1:80")}
	}
	drop := func(f decode.Flow) decode.NodeDrop {
		return decode.NodeDrop{Time: time.Now(), NetNS: uint32(host), Reason: "NETFILTER_DROP", Orig: f}
	}
	b.Add(drop(flow(1)))
	b.Add(drop(flow(1)))
	b.Add(drop(flow(2)))
	b.Add(drop(flow(3)))
	if _, ok := b.Lookup(flow(1)); ok {
		t.Errorf("flow 1 kept past the bound of 2")
	}
	mapped := flow(2)
	mapped.Src = netip.AddrPortFrom(netip.AddrFrom16(mapped.Src.Addr().As16()), 2)
	f, ok := b.Lookup(mapped)
	if !ok || f.N != 1 || f.Counted != 1 || f.InsertFailed != 10 || f.CTDrop != 10 {
		t.Errorf("flow 2 (asked v4-mapped): %+v %v, want 1 drop with insert_failed and drop +10", f, ok)
	}
	before := time.Now()
	if b.MissedSince(before) {
		t.Errorf("missed drops with none held back")
	}
	missed = 3
	if !b.MissedSince(before) {
		t.Errorf("held back drops not seen")
	}
	n := reads
	b.Add(decode.NodeDrop{NetNS: 1, Orig: flow(4)}) // no such netns
	b.Add(decode.NodeDrop{NetNS: 1, Orig: flow(4)})
	if f, _ := b.Lookup(flow(4)); f.CountersErr == "" || reads != n || len(b.unreach) != 1 {
		t.Errorf("an unreachable netns: %+v, %d reads", f, reads-n)
	}
}

// A drop read after the next read of its netns's counters had begun (a
// reader that lags behind the drops) says nothing of which counters it
// moved: the move went into the read before it. It is not counted, so a
// full table's drops read late are not taken for a rule's (+0 each).
func TestDropBookLaggingRead(t *testing.T) {
	testenv.RequireRoot(t)
	host, err := netdiag.HostInode()
	if err != nil {
		t.Fatal(err)
	}
	b := NewDropBook(16)
	defer b.Close()
	var reads uint64
	b.Counters = func() (nodeport.ConntrackCounters, error) {
		reads++
		return nodeport.ConntrackCounters{Drop: 10 * reads}, nil
	}
	if err := b.Watch(uint32(host)); err != nil {
		t.Fatal(err)
	}
	f := decode.Flow{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.2:1"), Dst: netip.MustParseAddrPort("192.0.2.1:80")}
	early := time.Now() // the second drop happened here, before the first was read
	b.Add(decode.NodeDrop{Time: time.Now(), NetNS: uint32(host), Reason: "NETFILTER_DROP", Orig: f})
	b.Add(decode.NodeDrop{Time: early, NetNS: uint32(host), Reason: "NETFILTER_DROP", Orig: f})
	got, _ := b.Lookup(f)
	if got.N != 2 || got.Counted != 1 || got.CTDrop != 10 {
		t.Errorf("%+v: want 2 drops, the first counted (+10), the one read late not", got)
	}
}

// The drops' reader never waits on /proc/kallsyms (a second per scan on a
// slow node: a timeout diagnosed meanwhile found its drops missing): Add
// returns while the file cannot be read at all (a FIFO nobody writes), and
// Lookup names the function once it can.
func TestDropBookNamesOffTheReader(t *testing.T) {
	testenv.RequireRoot(t)
	host, err := netdiag.HostInode()
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "kallsyms")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b := NewDropBook(16)
	defer b.Close()
	b.Ksyms = &netdiag.Kallsyms{Path: fifo}
	b.Counters = func() (nodeport.ConntrackCounters, error) { return nodeport.ConntrackCounters{}, nil }
	f := decode.Flow{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.2:1"), Dst: netip.MustParseAddrPort("192.0.2.1:80")}
	added := make(chan struct{})
	go func() {
		b.Add(decode.NodeDrop{Time: time.Now(), NetNS: uint32(host), Reason: "NETFILTER_DROP", Orig: f, Location: 0xffffffff81000150})
		close(added)
	}()
	select {
	case <-added:
	case <-time.After(30 * time.Second): // Add is blocked opening the FIFO
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // it opens: let it read nothing
		putKallsyms(t, fifo)
		if err == nil {
			w.Close()
		}
		<-added
		t.Fatal("Add waited on the kallsyms file")
	}
	putKallsyms(t, fifo)
	if got, ok := b.Lookup(f); !ok || got.Where != "nf_hook_slow" || got.N != 1 {
		t.Errorf("Lookup: %+v %v, want one drop freed in nf_hook_slow", got, ok)
	}
}

// putKallsyms puts a kallsyms file in place of the FIFO at path.
func putKallsyms(t *testing.T, path string) {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte("ffffffff81000000 T _stext\nffffffff81000100 t nf_hook_slow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
