package tracer

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/eaddr/eaddr/internal/testing/testns"
	"golang.org/x/sys/unix"
)

// detach closes prog's link, as if the kernel skipped every run of it (a
// BPF program already running on the CPU: Stats.RunsSkipped). Beside busy
// loopback traffic the kernel skipped a few of async_state's runs in each
// thousand timed-out connects here; that cannot be made on demand, this can.
func detach(t *testing.T, tr *Tracer, prog *ebpf.Program) {
	t.Helper()
	pi, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := pi.ID()
	for i, l := range tr.links {
		if li, err := l.Info(); err == nil && li.Program == id {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tr.links = slices.Delete(tr.links, i, i+1)
			return
		}
	}
	t.Fatalf("no link of program %v", prog)
}

// A refused connect's released source port is still in its event when
// async_state never ran for it: async_error, whose run follows the change
// to CLOSE (tcp_done_with_error), records it too; it is attached for that
// also without the asynchronous report (--async=false).
func TestReleasedPortWithoutStateRun(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			tr := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.ECONNREFUSED)}, Async: async})
			detach(t, tr, tr.objs.AsyncState)
			cookie := refuse(t, onePortNS(t), 0, 0)
			ev := expect(t, tr, "refused connect", SysConnect, unix.ECONNREFUSED)
			checkReleased(t, "without async_state", ev, 40000, true, false, cookie)
		})
	}
}

// A non-blocking connect that connected, its change to ESTABLISHED not
// seen (async_state's run skipped), and later reset by its peer, is not
// reported as a connect failing with ECONNRESET: the socket had its
// answer (rcv_nxt). Its SYN waits in a full accept queue, so the
// connection is made after connect() returned, by the SYN's retransmit.
func TestLaterErrorIsNotTheConnects(t *testing.T) {
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.ECONNREFUSED), int(unix.ECONNRESET)}, Async: true})
	detach(t, tr, tr.objs.AsyncState)
	ns := testns.New(t)
	err := ns.Do(func() error { return connectThenReset(t) })
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := readOne(t, tr, 500*time.Millisecond); err == nil {
		t.Errorf("event %s flags %#x async %d ns: a reset after the connection was made, reported as the connect's failure", unix.ErrnoName(unix.Errno(ev.Err)), ev.Flags, ev.AsyncNs)
	}
}

// connectThenReset: a listener whose accept queue (backlog 0) the first
// client fills; a second, non-blocking client's SYN is dropped, so its
// connect() returns EINPROGRESS; the first is accepted, the SYN's
// retransmit (1 s) connects the second, which the listener then accepts
// and resets (SO_LINGER 0).
func connectThenReset(t *testing.T) error {
	t.Helper()
	l, addr := fullListener(t)
	second, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(second)
	if err := unix.Connect(second, addr); !errors.Is(err, unix.EINPROGRESS) {
		t.Fatalf("second connect: %v, want EINPROGRESS (its SYN waiting)", err)
	}
	if st := tcpState(t, second); st != tcpSynSent {
		t.Fatalf("second client in state %d, want SYN_SENT (%d): the accept queue did not hold its SYN", st, tcpSynSent)
	}
	a, _, err := unix.Accept(l)
	if err != nil {
		return err
	}
	unix.Close(a)
	for deadline := time.Now().Add(10 * time.Second); tcpState(t, second) != tcpEstablished; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("second client not connected 10 s after the queue had room")
		}
	}
	b, _, err := unix.Accept(l)
	if err != nil {
		return err
	}
	if err := unix.SetsockoptLinger(b, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return err
	}
	unix.Close(b) // RST: the second client's socket gets ECONNRESET
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if e, _ := unix.GetsockoptInt(second, unix.SOL_SOCKET, unix.SO_ERROR); e == int(unix.ECONNRESET) {
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second client never saw the reset")
		}
	}
}

// fullListener listens on 127.0.0.1:8080 (in the calling thread's netns)
// with backlog 0, and fills its accept queue with a first, blocking client:
// the SYNs of later connects are dropped until it accepts. Both sockets
// are closed at the test's end.
func fullListener(t *testing.T) (l int, addr *unix.SockaddrInet4) {
	t.Helper()
	addr = &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: 8080}
	for _, client := range []bool{false, true} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		switch {
		case client:
			err = unix.Connect(fd, addr)
		default:
			l = fd
			if err = unix.Bind(fd, addr); err == nil {
				err = unix.Listen(fd, 0)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return l, addr
}

func tcpState(t *testing.T, fd int) uint8 {
	t.Helper()
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}
