//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

func TestErrnoMask(t *testing.T) {
	m, err := ErrnoMask([]int{98, 99, 1, 255})
	if err != nil {
		t.Fatal(err)
	}
	want := [4]uint64{1 << 1, 1<<34 | 1<<35, 0, 1 << 63}
	if m != want {
		t.Errorf("mask %x, want %x", m, want)
	}
	for _, bad := range []int{0, -1, 256} {
		if _, err := ErrnoMask([]int{bad}); err == nil {
			t.Errorf("ErrnoMask(%d) accepted", bad)
		}
	}
}

func newTracer(t *testing.T, opts Options) *Tracer {
	t.Helper()
	testenv.RequireRoot(t)
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %+v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// failBind makes this process fail bind() with EADDRNOTAVAIL: 192.0.2.1
// (TEST-NET-1) is on no interface. No packet is sent.
func failBind(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = unix.Bind(fd, &unix.SockaddrInet4{Port: 4242, Addr: [4]byte{192, 0, 2, 1}})
	if !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("bind to 192.0.2.1: %v, want EADDRNOTAVAIL", err)
	}
	return fd
}

func readOne(t *testing.T, tr *Tracer, within time.Duration) (RawEvent, error) {
	t.Helper()
	var ev RawEvent
	tr.SetDeadline(time.Now().Add(within))
	err := tr.Read(&ev)
	return ev, err
}

func TestBindFailureEvent(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid())})
	fd := failBind(t)
	ev, err := readOne(t, tr, 5*time.Second)
	if err != nil {
		t.Fatalf("no event: %v", err)
	}
	if ev.Syscall != SysBind || ev.Err != 99 || ev.Tgid != uint32(os.Getpid()) || ev.Fd != int32(fd) {
		t.Errorf("got syscall %d errno %d tgid %d fd %d, want bind 99 %d %d", ev.Syscall, ev.Err, ev.Tgid, ev.Fd, os.Getpid(), fd)
	}
	if ev.Ppid != uint32(os.Getppid()) || ev.Uid != uint32(os.Getuid()) {
		t.Errorf("ppid %d uid %d, want %d %d", ev.Ppid, ev.Uid, os.Getppid(), os.Getuid())
	}
	if ev.Flags&FlagSocket == 0 || ev.SockFamily != unix.AF_INET || ev.SockType != unix.SOCK_STREAM || ev.SockProtocol != unix.IPPROTO_TCP {
		t.Errorf("socket flags %d family %d type %d proto %d", ev.Flags, ev.SockFamily, ev.SockType, ev.SockProtocol)
	}
	if ev.Flags&FlagAddr == 0 || ev.AddrCopied != 16 || ev.Addr[0] != unix.AF_INET || ev.Addr[4] != 192 || ev.Addr[7] != 1 || ev.Addr[2] != 4242>>8 {
		t.Errorf("sockaddr flags %d copied %d bytes % x", ev.Flags, ev.AddrCopied, ev.Addr[:16])
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	if uint64(ev.Netns) != st.Ino {
		t.Errorf("netns %d, want %d", ev.Netns, st.Ino)
	}
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		t.Fatal(err)
	}
	if ev.ExeIno != exe.Ino || unix.Mkdev(ev.ExeDev>>20, ev.ExeDev&0xfffff) != exe.Dev {
		t.Errorf("exe ino %d dev %#x, want %d %#x", ev.ExeIno, ev.ExeDev, exe.Ino, exe.Dev)
	}
	target, _ := os.Readlink("/proc/self/exe")
	if got := cString(ev.ExeName[:]); got != filepath.Base(target) {
		t.Errorf("exe name %q, want %q", got, filepath.Base(target))
	}
	args := make([]byte, ev.ArgsLen)
	for i := range args {
		args[i] = byte(ev.Args[i])
	}
	if want := os.Args[0] + "\x00"; !strings.HasPrefix(string(args), want[:min(len(want), len(args))]) || len(args) == 0 {
		t.Errorf("args %q, want a prefix of %q", args, want)
	}
	if ev.BootNs == 0 || ev.Mntns == 0 || ev.CgroupId == 0 {
		t.Errorf("boot %d mntns %d cgroup %d: want all set", ev.BootNs, ev.Mntns, ev.CgroupId)
	}
}

// failBindPort is failBind with a chosen port, so that events can be told apart.
func failBindPort(t *testing.T, port int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{192, 0, 2, 1}})
	if !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("bind to 192.0.2.1:%d: %v, want EADDRNOTAVAIL", port, err)
	}
}

// bindTwice fails bind() with EINVAL: the socket is already bound.
func bindTwice(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lo := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, lo); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, lo); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("second bind: %v, want EINVAL", err)
	}
}

// closedPort returns a loopback TCP port that nothing listens on: it was
// bound and released again.
func closedPort(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*unix.SockaddrInet4).Port
}

// connectRefused fails a blocking connect() with ECONNREFUSED: a closed
// loopback port.
func connectRefused(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: closedPort(t), Addr: [4]byte{127, 0, 0, 1}})
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("connect to a closed loopback port: %v, want ECONNREFUSED", err)
	}
}

// connectShort fails connect() with EINVAL: an address length of 4 bytes is
// shorter than any sockaddr_in. Nothing is sent.
func connectShort(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var sa [16]byte
	sa[0] = unix.AF_INET
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa[0])), 4)
	if errno != unix.EINVAL {
		t.Fatalf("connect with a 4-byte address: %v, want EINVAL", errno)
	}
}

// expect reads the next event and checks its syscall and errno.
func expect(t *testing.T, tr *Tracer, what string, syscall uint8, errno unix.Errno) RawEvent {
	t.Helper()
	ev, err := readOne(t, tr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: no event: %v", what, err)
	}
	if ev.Syscall != syscall || ev.Err != int32(errno) || ev.Flags&FlagNodePort != 0 {
		t.Fatalf("%s: got syscall %d errno %d flags %d, want syscall %d errno %d", what, ev.Syscall, ev.Err, ev.Flags, syscall, errno)
	}
	return ev
}

// With errnos that do not match, nothing is reported: the filter is in the
// kernel. The failures outside the filter come first, on both programs;
// the sentinels inside it (EINVAL from bind, then from connect) come after,
// so the first two events read must be the sentinels: that proves both
// programs were attached and listening, and that nothing before them passed.
func TestErrnoFilter(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.EINVAL)}})
	failBind(t)       // EADDRNOTAVAIL from bind: filtered out
	connectRefused(t) // ECONNREFUSED from connect: filtered out
	bindTwice(t)      // sentinel: EINVAL from bind
	connectShort(t)   // sentinel: EINVAL from connect
	expect(t, tr, "bind sentinel (first event)", SysBind, unix.EINVAL)
	expect(t, tr, "connect sentinel (second event)", SysConnect, unix.EINVAL)
	if ev, err := readOne(t, tr, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an event after the sentinels: %+v %v", ev, err)
	}
}

// EINPROGRESS from a non-blocking connect is not a failure, even with AllErrnos.
func TestAllErrnosSkipsEINPROGRESS(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), AllErrnos: true})
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l)
	lo := [4]byte{127, 0, 0, 1}
	if err := unix.Bind(l, &unix.SockaddrInet4{Addr: lo}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(l)
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c)
	err = unix.Connect(c, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		t.Fatalf("non-blocking connect: %v", err)
	}
	failBind(t) // the sentinel: the next event must be this one
	ev, err := readOne(t, tr, 5*time.Second)
	if err != nil {
		t.Fatalf("no event: %v", err)
	}
	if ev.Err != int32(unix.EADDRNOTAVAIL) {
		t.Errorf("first event has errno %d, want the sentinel's EADDRNOTAVAIL (EINPROGRESS must not be reported)", ev.Err)
	}
}

// A full ring buffer drops events in the kernel and counts every one.
func TestLostCounter(t *testing.T) {
	page := os.Getpagesize()
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), RingSize: page})
	const calls = 200 // far more than one page of 232-byte records holds
	for range calls {
		failBind(t)
	}
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.KernelLost == 0 {
		t.Fatalf("no loss counted after %d events into a %d-byte ring", calls, page)
	}
	// What the ring kept is read with a generous deadline (a busy machine
	// may not run this goroutine for a while); then nothing more may come.
	var read uint64
	for read+st.KernelLost < calls {
		if _, err := readOne(t, tr, 5*time.Second); err != nil {
			break
		}
		read++
	}
	if _, err := readOne(t, tr, 200*time.Millisecond); err == nil {
		read++ // one more than generated: reported below
	}
	if read+st.KernelLost != calls {
		t.Errorf("read %d + lost %d = %d, want %d", read, st.KernelLost, read+st.KernelLost, calls)
	}
	t.Logf("ring of %d bytes: %d events read, %d counted lost", page, read, st.KernelLost)
}

// Stop drains what is queued and nothing after it: three failures queued
// before Stop (ports 4201-4203) are read, in order, then ErrClosed; failures
// after Stop reach neither the ring (the producer position does not move)
// nor the reader.
func TestStopDrains(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid())})
	for i := range 3 {
		failBindPort(t, 4201+i)
	}
	queued := tr.Pending()
	if queued == 0 {
		t.Fatal("nothing queued before Stop: the tracer was not listening")
	}
	tr.Stop()
	for i := range 5 {
		failBindPort(t, 4301+i) // after Stop: must not be reported
	}
	if p := tr.Pending(); p != queued {
		t.Errorf("%d bytes queued before Stop, %d after five more failures: the programs are still attached", queued, p)
	}
	var got []int
	for {
		ev, err := readOne(t, tr, 2*time.Second)
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatalf("read after Stop, with %v read: %v (the reader was not woken: no Flush?)", got, err)
		}
		got = append(got, int(ev.Addr[2])<<8|int(ev.Addr[3]))
		if len(got) > 8 {
			t.Fatalf("read %v after Stop and still no ErrClosed", got)
		}
	}
	if !slices.Equal(got, []int{4201, 4202, 4203}) {
		t.Errorf("drained ports %v after Stop, want [4201 4202 4203]", got)
	}
	failBindPort(t, 4401)
	if p := tr.Pending(); p != 0 {
		t.Errorf("%d bytes queued by a failure after the drain: the programs are still attached", p)
	}
	if st, err := tr.Stats(); err != nil || st.Events != 3 || st.KernelLost != 0 {
		t.Errorf("stats %+v %v, want 3 events, none lost", st, err)
	}
}

// Stop wakes a Read that is blocked on an empty ring: it returns ErrClosed,
// not a deadline.
func TestStopWakesReader(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid())})
	errc := make(chan error, 1)
	go func() { _, err := readOne(t, tr, 10*time.Second); errc <- err }()
	time.Sleep(100 * time.Millisecond) // let it block
	tr.Stop()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("blocked Read after Stop: %v, want ErrClosed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Read did not return after Stop")
	}
}

// Reading an event allocates nothing: the record and the event are reused.
func TestReadDoesNotAllocate(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid())})
	const n = 150
	for range n {
		failBind(t)
	}
	var ev RawEvent
	tr.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tr.Read(&ev); err != nil { // the first read sizes the record's buffer
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := tr.Read(&ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Read allocates %.1f times per event, want 0", allocs)
	}
}

func cString(b []int8) string {
	var out []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// A connect() whose source port lands in the configured range is reported
// as a NodePort collision; with the check off, nothing is.
func TestNodePortCollision(t *testing.T) {
	testenv.RequireRoot(t)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	dial := func() int {
		t.Helper()
		// UDP connect picks a source port without sending anything.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		sa, _ := unix.Getsockname(fd)
		return sa.(*unix.SockaddrInet4).Port
	}
	// The tracers that must not report the dial also report ECONNREFUSED:
	// a refused connect() after the dial is their sentinel, the proof that
	// their connect program was attached when the dial ran.
	refused := []int{int(unix.ECONNREFUSED)}
	off := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: refused})
	// Every port is "in the NodePort range" here, so the next dial collides.
	on := newTracer(t, Options{PID: uint32(os.Getpid()), NodePort: &NodePortCheck{NetNS: uint32(st.Ino), Lo: 1, Hi: 65535}})
	// Outside the range: nothing.
	narrow := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: refused, NodePort: &NodePortCheck{NetNS: uint32(st.Ino), Lo: 1, Hi: 2}})
	port := dial()
	connectRefused(t)
	ev, err := readOne(t, on, 5*time.Second)
	if err != nil {
		t.Fatalf("no collision event: %v", err)
	}
	if ev.Flags&FlagNodePort == 0 || ev.Err != 0 || ev.Syscall != SysConnect || int(ev.LocalPort) != port {
		t.Errorf("event flags %d errno %d syscall %d local port %d, want a NodePort event for port %d", ev.Flags, ev.Err, ev.Syscall, ev.LocalPort, port)
	}
	expect(t, off, "without the check, the first event is the refused connect", SysConnect, unix.ECONNREFUSED)
	expect(t, narrow, fmt.Sprintf("port %d outside 1-2: the first event is the refused connect", port), SysConnect, unix.ECONNREFUSED)
}

// With the NodePort check off, the verifier drops its code: the program the
// kernel runs is smaller than with the check on.
func TestNodePortCheckOffCostsNothing(t *testing.T) {
	off := newTracer(t, Options{})
	on := newTracer(t, Options{NodePort: &NodePortCheck{NetNS: 1, Lo: 30000, Hi: 32767}})
	count := func(tr *Tracer) int {
		info, err := tr.objs.ExitConnect.Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			testenv.Skip(t, "kernel does not give back the translated program: "+err.Error())
		}
		return len(insns)
	}
	nOff, nOn := count(off), count(on)
	t.Logf("exit_connect as the kernel runs it: %d instructions with the check off, %d on", nOff, nOn)
	if nOff >= nOn {
		t.Errorf("check off: %d instructions, not fewer than on (%d): the dead code was not removed", nOff, nOn)
	}
}

// The socket's own local address, as the BPF program reads it at the exit
// of a failing bind() (EINVAL: already bound) and connect() (ECONNREFUSED),
// is the whole address: 127.0.0.5 once read as 127.0.0.0 (one byte copied).
// For bind() it is not in the JSON (that shows the requested address), so
// the raw event is checked here.
func TestSocketLocalAddress(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.EINVAL), int(unix.ECONNREFUSED)}})
	for _, tc := range []struct {
		name   string
		family int
		sa     func(port int) unix.Sockaddr
		want   []byte // LocalAddr's significant bytes
	}{
		{"v4", unix.AF_INET, func(p int) unix.Sockaddr { return &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 5}, Port: p} }, []byte{127, 0, 0, 5}},
		{"v6", unix.AF_INET6, func(p int) unix.Sockaddr { return &unix.SockaddrInet6{Addr: [16]byte{15: 1}, Port: p} }, []byte{15: 1}},
		{"v4-mapped", unix.AF_INET6, func(p int) unix.Sockaddr {
			return &unix.SockaddrInet6{Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 7}, Port: p}
		}, []byte{10: 0xff, 11: 0xff, 12: 127, 15: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := unix.Socket(tc.family, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			port := closedPort(t) // free on 127.0.0.1, and so on the others in all likelihood
			if err := unix.Bind(fd, tc.sa(port)); err != nil {
				t.Fatalf("bind: %v", err)
			}
			if err := unix.Bind(fd, tc.sa(port)); !errors.Is(err, unix.EINVAL) {
				t.Fatalf("second bind: %v, want EINVAL", err)
			}
			ev := expect(t, tr, "bind on a bound socket", SysBind, unix.EINVAL)
			got := ev.LocalAddr[:len(tc.want)]
			if !slices.Equal(got, tc.want) || int(ev.LocalPort) != port || ev.Flags&FlagSocket == 0 {
				t.Errorf("bind: socket local % x port %d (flags %d), want % x port %d", got, ev.LocalPort, ev.Flags, tc.want, port)
			}
			remote := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: closedPort(t)}
			var dst unix.Sockaddr = remote
			if tc.family == unix.AF_INET6 {
				dst = &unix.SockaddrInet6{Addr: [16]byte{15: 1}, Port: remote.Port}
				if tc.want[10] == 0xff {
					dst = &unix.SockaddrInet6{Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}, Port: remote.Port}
				}
			}
			if err := unix.Connect(fd, dst); !errors.Is(err, unix.ECONNREFUSED) {
				t.Fatalf("connect to a closed port: %v, want ECONNREFUSED", err)
			}
			ev = expect(t, tr, "refused connect from a bound socket", SysConnect, unix.ECONNREFUSED)
			got = ev.LocalAddr[:len(tc.want)]
			if !slices.Equal(got, tc.want) || int(ev.LocalPort) != port {
				t.Errorf("connect: socket local % x port %d, want % x port %d", got, ev.LocalPort, tc.want, port)
			}
		})
	}
}
