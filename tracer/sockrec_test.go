package tracer

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/eaddr/eaddr/diagnose/portmodel"
)

// The Go SockRec matches struct sock_rec in the committed object's BTF: a
// stale binding (bpf/sockiter.h changed, make generate not run) fails here.
func TestSockRecLayoutMatchesBTF(t *testing.T) {
	spec, err := loadSockiter()
	if err != nil {
		t.Fatal(err)
	}
	var st *btf.Struct
	if err := spec.Types.TypeByName("sock_rec", &st); err != nil {
		t.Fatal(err)
	}
	goType := reflect.TypeOf(SockRec{})
	if uintptr(st.Size) != goType.Size() || st.Size != 80 {
		t.Errorf("struct sock_rec: %d bytes in BTF, %d in Go, want 80", st.Size, goType.Size())
	}
	for _, m := range st.Members {
		f, ok := goType.FieldByNameFunc(func(n string) bool { return strings.ToLower(n) == strings.ReplaceAll(m.Name, "_", "") })
		if !ok {
			t.Errorf("member %s has no Go field", m.Name)
		} else if uintptr(m.Offset.Bytes()) != f.Offset {
			t.Errorf("%s at %d in BTF, %d in Go", m.Name, m.Offset.Bytes(), f.Offset)
		}
	}
}

func rec4(src uint8, state uint8, local, remote string) SockRec {
	l, r := netip.MustParseAddrPort(local), netip.MustParseAddrPort(remote)
	x := SockRec{Source: src, Proto: 6, State: state, Family: afInet, Netns: 7, Sport: l.Port(), Dport: r.Port()}
	copy(x.Saddr[:], l.Addr().AsSlice())
	copy(x.Daddr[:], r.Addr().AsSlice())
	return x
}

func TestSocketsDecode(t *testing.T) {
	withBucket := func(r SockRec, fr, frp int8) SockRec {
		r.Flags |= SockBucket
		r.Fastreuse, r.Fastreuseport = fr, frp
		return r
	}
	est := rec4(SockSrcTCP, 1, "127.0.0.1:40000", "127.0.0.1:80")
	mapped := SockRec{Source: SockSrcTCP, Proto: 6, State: 10, Family: afInet6, Netns: 7, Sport: 8080}
	copy(mapped.Saddr[:], netip.MustParseAddr("::ffff:10.0.0.1").AsSlice())
	opts := rec4(SockSrcFile, 7, "0.0.0.0:5000", "0.0.0.0:0")
	opts.Flags, opts.Reuse, opts.BoundDevIf, opts.Inode, opts.Uid = SockOpts|SockReusePort, 1, 3, 99, 1000
	tw := rec4(SockSrcTCP, 6, "127.0.0.1:40001", "127.0.0.1:80")
	tw.Flags, tw.TwTsRecentStamp, tw.TwEntryStamp = SockTW|SockTWEntry, 1234, 0xfffffff0
	udp := rec4(SockSrcUDP, 7, "127.0.0.1:53", "0.0.0.0:0")
	udp.Proto = 17
	udp = withBucket(udp, -1, -1) // never written for UDP; ignored if it were
	orphan := rec4(SockSrcTCP, 5, "127.0.0.1:40002", "127.0.0.1:80")
	orphan.Flags = SockOrphan
	const nowMS = 3<<32 + 5 // the u32 ms clock wrapped (for the third time) 21 ms after the stamp
	for _, tc := range []struct {
		name string
		rec  SockRec
		want portmodel.Socket
	}{
		{"bucket by connect", withBucket(est, -1, -1), portmodel.Socket{Proto: portmodel.TCP, State: 1, Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:80"), Bucket: portmodel.BucketByConnect}},
		{"fastreuseport set", withBucket(est, -1, 0), portmodel.Socket{Proto: portmodel.TCP, State: 1, Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:80"), Bucket: portmodel.BucketByBind}},
		{"fastreuse set", withBucket(est, 1, -1), portmodel.Socket{Proto: portmodel.TCP, State: 1, Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:80"), Bucket: portmodel.BucketByBind}},
		{"no bucket read", est, portmodel.Socket{Proto: portmodel.TCP, State: 1, Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:80")}},
		{"v4-mapped listener", mapped, portmodel.Socket{Proto: portmodel.TCP, State: 10, Local: netip.MustParseAddrPort("10.0.0.1:8080")}},
		{"options", opts, portmodel.Socket{Proto: portmodel.TCP, State: 7, Local: netip.MustParseAddrPort("0.0.0.0:5000"), Known: true, Reuse: true, ReusePort: true, BoundDev: 3, Inode: 99, UID: 1000}},
		{"time_wait", tw, portmodel.Socket{Proto: portmodel.TCP, State: 6, Local: netip.MustParseAddrPort("127.0.0.1:40001"), Remote: netip.MustParseAddrPort("127.0.0.1:80"), TW: portmodel.TimeWait{Known: true, TSRecent: true, StampSec: 1234, StampMS: 3<<32 - 16}}},
		{"udp", udp, portmodel.Socket{Proto: portmodel.UDP, State: 7, Local: netip.MustParseAddrPort("127.0.0.1:53")}},
		{"orphan", orphan, portmodel.Socket{Proto: portmodel.TCP, State: 5, Local: netip.MustParseAddrPort("127.0.0.1:40002"), Remote: netip.MustParseAddrPort("127.0.0.1:80"), Orphan: true}},
	} {
		got, err := Sockets([]SockRec{tc.rec}, 7, nowMS)
		if err != nil || len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: got %+v, %v\n want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestSocketsOnePerInode(t *testing.T) {
	b := rec4(SockSrcFile, 7, "127.0.0.1:40000", "0.0.0.0:0") // only bound, behind two fds
	b.Inode = 5
	a := rec4(SockSrcTCP, 1, "127.0.0.1:40000", "127.0.0.1:80") // the same socket, connected by the time iter/tcp ran
	a.Inode = 5
	tw1 := rec4(SockSrcTCP, 6, "127.0.0.1:40001", "127.0.0.1:80")
	tw2 := rec4(SockSrcTCP, 6, "127.0.0.1:40002", "127.0.0.1:80")
	got, err := Sockets([]SockRec{b, b, a, tw1, tw2}, 7, 0)
	if err != nil || len(got) != 3 || got[0].State != 7 || got[1].Local.Port() != 40001 || got[2].Local.Port() != 40002 {
		t.Errorf("got %+v, %v; want the bound socket once, as first seen, and both TIME_WAITs (inode 0)", got, err)
	}
}

func TestSocketsRefusesOtherNetns(t *testing.T) {
	a := rec4(SockSrcTCP, 1, "127.0.0.1:40000", "127.0.0.1:80")
	b := a
	b.Netns = 8
	if got, err := Sockets([]SockRec{a, b}, 7, 0); err == nil || !strings.Contains(err.Error(), "net:[8]") {
		t.Errorf("a record of net:[8] in a read of net:[7]: got %+v, %v; want an error naming it", got, err)
	}
	for _, bad := range []func(*SockRec){
		func(r *SockRec) { r.Family = 1 },
		func(r *SockRec) { r.Proto = 136 },
	} {
		r := a
		bad(&r)
		if _, err := Sockets([]SockRec{r}, 7, 0); err == nil {
			t.Errorf("record %+v decoded without error", r)
		}
	}
}
