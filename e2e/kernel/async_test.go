package kernel

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/demo"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/connwait"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// asyncClients are the clients that connect non-blocking, each toward
// dst (host:port).
func asyncClients(t *testing.T, godial, dst string) map[string][]string {
	host, port, _ := strings.Cut(dst, ":")
	out := map[string][]string{}
	if p := demo.Look("curl"); p != "" {
		out["curl"] = []string{p, "-sS", "--connect-timeout", "20", "http://" + dst + "/"}
	}
	if godial != "" {
		out["go"] = []string{godial, "dial", "tcp", dst}
	}
	if p := demo.Look("node"); p != "" {
		out["node"] = []string{p, "-e", fmt.Sprintf(`require("net").connect(%s,%q).on("error",e=>console.log(e.message))`, port, host)}
	}
	for name, pkg := range map[string]string{"curl": "curl", "node": "nodejs"} {
		if out[name] == nil {
			t.Run(name, func(t *testing.T) { testenv.Missing(t, name, pkg) })
		}
	}
	if out["go"] == nil {
		t.Run("go", func(t *testing.T) { testenv.Skip(t, "testdata/clients/godial was not built (no go on PATH)") })
	}
	return out
}

// A refused and a timed-out non-blocking connect from curl, Go and Node
// each give exactly one event: the socket's errno, the destination,
// "async": true, how long after the connect() it came, and the line the
// client printed. The sentinel after each proves nothing else was coming.
func TestAsyncFailures(t *testing.T) {
	testenv.RequireRoot(t)
	refused, dropped := testns.New(t), eaddrtest.BlackholeNS(t)
	godial := eaddrtest.BuildGodial(t)
	p := eaddrtest.StartTrace(t, "--errno", "ECONNREFUSED,ETIMEDOUT")
	for _, sc := range []struct {
		name, errno, dst string
		ns               *netns.NS
		min, max         time.Duration
	}{
		{"refused", "ECONNREFUSED", "127.0.0.1:8080", refused, 0, time.Second},
		{"timed out", "ETIMEDOUT", "10.9.0.2:80", dropped, 2 * time.Second, 10 * time.Second},
	} {
		for name, argv := range asyncClients(t, godial, sc.dst) {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				start, from := time.Now(), p.Count()
				pid, out := eaddrtest.RunInNS(t, sc.ns, argv...)
				p.ForPID(pid, 1, 5*time.Second)
				p.Sentinel(t, "connect")
				evs := p.ForPID(pid, 2, 0)
				if len(evs) != 1 {
					// the netns's others say whether it came with another pid
					t.Fatalf("%d events, want 1: %+v (it printed %q after %v); all events of its netns since it started: %+v",
						len(evs), evs, out, time.Since(start), p.ForRow(from, sc.ns.Inode()))
				}
				checkAsync(t, evs[0], sc.errno, sc.dst, sc.min, sc.max, out)
			})
		}
	}
}

func checkAsync(t *testing.T, ev eaddrtest.JSONEvent, errno, dst string, min, max time.Duration, printed string) {
	t.Helper()
	host, port, _ := strings.Cut(dst, ":")
	if ev.Syscall != "connect" || ev.Errno != errno || !ev.Async {
		t.Errorf("%s %s async %v, want connect %s async", ev.Syscall, ev.Errno, ev.Async, errno)
	}
	if ev.Remote == nil || ev.Remote.IP != host || strconv.Itoa(ev.Remote.Port) != port {
		t.Errorf("remote %+v, want %s", ev.Remote, dst)
	}
	// Refused over loopback, the reset comes within connect() itself and
	// the kernel has released the source port by the time it returns.
	if ev.Local == nil || (ev.Local.Port == 0 && min > 0) {
		t.Errorf("local %+v: want the source port connect() chose", ev.Local)
	}
	after := time.Duration(ev.AsyncAfterMs * float64(time.Millisecond))
	if after < min || after > max {
		t.Errorf("async_after_ms %v, want between %v and %v", ev.AsyncAfterMs, min, max)
	}
	if ev.Explain == nil || eaddrtest.JudgeWording(ev.Explain.ClientMessage, printed) == "wrong" || ev.Explain.ClientMessage == "" {
		t.Errorf("predicted %+v; it printed %q", ev.Explain, printed)
	}
	t.Logf("%s after %.1f ms: %q (printed %q)", ev.Errno, ev.AsyncAfterMs, ev.Explain.ClientMessage, strings.TrimSpace(printed))
}

// The default errnos are unchanged: no asynchronous event, and --async=false
// turns them off under --errno all. The sentinel proves each trace listened.
func TestAsyncOnlyWhenAsked(t *testing.T) {
	ns := testns.New(t)
	curl := testenv.Program(t, "curl", "curl")
	def := eaddrtest.StartTrace(t)
	off := eaddrtest.StartTrace(t, "--errno", "all", "--async=false")
	pid, out := eaddrtest.RunInNS(t, ns, curl, "-sS", "http://127.0.0.1:8080/")
	// off first: it sees the bind sentinel too (--errno all), and must not
	// take it, arriving late, for its own.
	off.SentinelPastHolds(t, "connect")
	def.SentinelPastHolds(t, "bind")
	for name, p := range map[string]*eaddrtest.TraceProc{"default": def, "--async=false": off} {
		for _, ev := range p.ForPID(pid, 1, 0) {
			if ev.Errno == "ECONNREFUSED" || ev.Async {
				t.Errorf("%s: curl's refused non-blocking connect (%q) gave %+v", name, out, ev)
			}
		}
	}
}

// A closed socket's memory is reused by the next one: a blocking connect
// refused on a new socket is its own failure, even where an earlier
// socket at the same address had its refusal reported asynchronously.
// 50 rounds of a non-blocking then a blocking refused connect from this
// process: 100 events, 50 of each. A refused connect of this process
// after them (the sentinel) is written after every one of them, so none
// is waited for by a deadline: once the sentinel is out, 100 before it or
// a failure, with eaddr's totals (lost, dropped, delivered) to say where
// the others went. (A 10 s deadline once saw 49 in an arm64 guest under
// TCG on a loaded CI machine, and could not say whether eaddr lost them.)
func TestAsyncSocketReuse(t *testing.T) {
	testenv.RequireRoot(t)
	port := eaddrtest.ClosedPort(t)
	p := eaddrtest.StartTrace(t, "--errno", "ECONNREFUSED,EADDRNOTAVAIL", "--pid", strconv.Itoa(os.Getpid()), "--rate-limit", "off", "--diagnose=false")
	sa := &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	for i := 0; i < 50; i++ {
		for _, flags := range []int{unix.SOCK_NONBLOCK, 0} {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|flags, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = unix.Connect(fd, sa)
			if flags == unix.SOCK_NONBLOCK && err == unix.EINPROGRESS {
				// Its end, before the close: the RST to the SYN may be
				// handled after connect() returned (the loopback's softirq
				// can run late, on ksoftirqd, on a loaded machine), and a
				// socket closed in SYN_SENT has no refusal to report.
				err = connwait.Outcome(fd, time.Minute)
			}
			unix.Close(fd)
			if err != unix.ECONNREFUSED {
				t.Fatalf("connect (flags %#x): %v, want the refusal", flags, err)
			}
		}
	}
	bindSentinel(t)
	p.WaitFor(t, 30*time.Second, func(ev eaddrtest.JSONEvent) bool { return ev.Process.PID == os.Getpid() && ev.Syscall == "bind" })
	refused, async := 0, 0
	for _, ev := range p.ForPID(os.Getpid(), 0, 0) {
		if ev.Syscall == "bind" {
			break
		}
		if ev.Errno == "ECONNREFUSED" {
			refused++
		}
		if ev.Async {
			async++
		}
	}
	if refused != 100 || async != 50 {
		t.Errorf("%d refusals before the sentinel, %d async; want 100, 50; eaddr's totals %v", refused, async, p.Stop(t))
	}
}

// bindSentinel makes a bind() of this process fail: EADDRNOTAVAIL, the
// address is no local one.
func bindSentinel(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{192, 0, 2, 1}}); err != unix.EADDRNOTAVAIL {
		t.Fatalf("bind to 192.0.2.1: %v, want EADDRNOTAVAIL", err)
	}
}

// A non-blocking connect that succeeds within the call (loopback: the
// handshake is done before connect() returns EINPROGRESS) leaves nothing
// pending: otherwise, when its memory is reused, a later socket's refusal
// would be reported as its, and the later socket's own report swallowed.
// 200 such connects, then 50 blocking refused ones: exactly 50 events,
// none asynchronous.
func TestAsyncNothingPendingAfterConnect(t *testing.T) {
	testenv.RequireRoot(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eaddrtest.AcceptAll(t, l, false)
	listening := &unix.SockaddrInet4{Port: l.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}
	refused := &unix.SockaddrInet4{Port: eaddrtest.ClosedPort(t), Addr: [4]byte{127, 0, 0, 1}}
	p := eaddrtest.StartTrace(t, "--errno", "all", "--pid", strconv.Itoa(os.Getpid()), "--rate-limit", "off", "--diagnose=false")
	for round := 0; round < 50; round++ {
		for i := 0; i < 4; i++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.Connect(fd, listening) // EINPROGRESS or 0
			time.Sleep(100 * time.Microsecond)
			unix.Close(fd)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Connect(fd, refused); err != unix.ECONNREFUSED {
			t.Fatalf("connect: %v", err)
		}
		unix.Close(fd)
	}
	evs := beforeSentinel(t, p)
	async := 0
	for _, ev := range evs {
		if ev.Async {
			async++
		}
	}
	if len(evs) != 50 || async != 0 {
		t.Errorf("%d events, %d async; want 50 blocking refusals, none async: %s", len(evs), async, errnos(evs))
	}
}

// beforeSentinel fails bind() on an address of its own (192.0.2.1 and a
// random port: no other test's) and returns this process's events that
// came before that failure's: the ring keeps their order, so everything
// the test did before was read by then.
func beforeSentinel(t *testing.T, p *eaddrtest.TraceProc) []eaddrtest.JSONEvent {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	port := 1024 + int(time.Now().UnixNano()%64000)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{192, 0, 2, 1}}); err != unix.EADDRNOTAVAIL {
		t.Fatalf("sentinel bind: %v, want EADDRNOTAVAIL", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := p.ForPID(os.Getpid(), 0, 0)
		for i, ev := range evs {
			if ev.Syscall == "bind" && ev.Local != nil && ev.Local.IP == "192.0.2.1" && ev.Local.Port == port {
				return evs[:i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sentinel bind() to 192.0.2.1:%d was not reported within 30 s: %s", port, errnos(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errnos lists events as syscall/errno[/async], for a failure message.
func errnos(evs []eaddrtest.JSONEvent) string {
	var s []string
	for _, ev := range evs {
		e := ev.Syscall + "/" + ev.Errno
		if ev.Async {
			e += "/async"
		}
		s = append(s, e)
	}
	return fmt.Sprintf("%d events: %s", len(evs), strings.Join(s, " "))
}

// A blocking connect() that a signal interrupts is restarted by the kernel
// (Go's handlers have SA_RESTART): the program sees one call and one
// failure. The exit tracepoint sees each interrupted attempt return
// ERESTARTSYS (512), which the program never sees; under --errno all
// that was reported as a failure of its own ("unknown:512"), and under
// load, where a Go runtime signal can land while a loopback connect
// waits, it made TestAsyncNothingPendingAfterConnect count 51 events.
// Here the connect waits for certain: its SYN goes to a listener whose
// accept queue is full (listen backlog 0, one connection not accepted),
// which drops it. The thread gets SIGURG only while it is in connect()
// (/proc/.../syscall); then the listener closes and the next SYN is
// refused.
func TestInterruptedConnectIsOneFailure(t *testing.T) {
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.tcp_syn_retries", "3"); err != nil {
		t.Fatal(err)
	}
	var lfd, first int
	dst := &unix.SockaddrInet4{Port: 8080, Addr: [4]byte{127, 0, 0, 1}}
	err := ns.Do(func() (err error) {
		if lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err != nil {
			return err
		}
		if err = unix.Bind(lfd, dst); err != nil {
			return err
		}
		if err = unix.Listen(lfd, 0); err != nil {
			return err
		}
		if first, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err != nil {
			return err
		}
		return unix.Connect(first, dst) // fills the accept queue
	})
	if err != nil {
		t.Fatalf("the full listener: %v", err)
	}
	defer unix.Close(first)
	defer unix.Close(lfd)
	p := eaddrtest.StartTrace(t, "--errno", "all", "--pid", strconv.Itoa(os.Getpid()), "--rate-limit", "off", "--diagnose=false")
	tids := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- ns.Do(func() error {
			tids <- unix.Gettid()
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Connect(fd, dst)
		})
	}()
	signals := interruptConnect(t, <-tids, done, 3)
	unix.Shutdown(lfd, unix.SHUT_RDWR) // closes the listener: the next SYN is refused
	if err := <-done; err != unix.ECONNREFUSED {
		t.Fatalf("connect: %v, want ECONNREFUSED", err)
	}
	evs := beforeSentinel(t, p)
	if len(evs) != 1 || evs[0].Syscall != "connect" || evs[0].Errno != "ECONNREFUSED" || evs[0].Async {
		t.Errorf("one connect() interrupted %d times: %s; want the one ECONNREFUSED", signals, errnos(evs))
	}
}

// interruptConnect sends SIGURG to thread tid n times, each while the
// thread sleeps in connect() (the first field of /proc/self/task/TID/syscall:
// 42 on amd64, 203 on arm64), and returns how many it sent.
func interruptConnect(t *testing.T, tid int, done chan error, n int) int {
	t.Helper()
	connect := map[string]string{"amd64": "42", "arm64": "203"}[runtime.GOARCH]
	sent := 0
	for deadline := time.Now().Add(30 * time.Second); sent < n; {
		select {
		case err := <-done:
			t.Fatalf("connect returned %v after %d signals: it was to wait", err, sent)
		case <-time.After(50 * time.Millisecond):
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/syscall", tid))
		if f := strings.Fields(string(b)); len(f) > 1 && f[0] == connect {
			if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if time.Now().After(deadline) {
			t.Fatalf("the thread was in connect() for %d of %d signals in 30 s", sent, n)
		}
	}
	return sent
}
