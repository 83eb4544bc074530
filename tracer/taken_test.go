package tracer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testns"
)

// A failing connect's program can take the socket's error with SO_ERROR,
// which takes no lock, from another CPU after the kernel set it and before
// the async programs look (tcp_done_with_error sets the error, changes the
// state to CLOSE, then reports the error): seen in a Debian 12 guest, where
// the connect then had no event and nothing counted it. (recv and send take
// the socket's lock, which the kernel holds meanwhile: they cannot.)
// holdEnd makes that moment happen: it holds the change to CLOSE until a
// taker process on the other CPU took the error, and lets the taker's exit
// of getsockopt run either before the change (late false) or after the
// error's report (late true). The failure
// is reported, with the error the program took, before the socket is
// closed, and nothing counted unseen. A connect its program disconnects
// (connect with AF_UNSPEC: CLOSE with no error, then the report of
// ECONNRESET, which SO_ERROR then reads) is no failure.
func TestAsyncErrorTaken(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs, has %v: the program takes the error on one while the other is held in the connect's end", cpus)
	}
	h := newHoldEnd(t)
	tr := newTracer(t, Options{PID: uint32(os.Getpid()), Errnos: []int{int(unix.ETIMEDOUT), int(unix.ECONNRESET)}, Async: true})
	h.attachAfter(t)
	for _, tc := range []struct {
		name string
		late bool
	}{{"SO_ERROR seen before the change", false}, {"SO_ERROR seen after the report", true}} {
		t.Run(tc.name, func(t *testing.T) {
			before := stats(t, tr).AsyncUnseen
			err := testns.New(t).Do(func() error { return takeError(t, h, tr, tc.late, cpus[:2]) })
			if err != nil {
				t.Fatal(err)
			}
			noMoreEvents(t, tr)
			if got := stats(t, tr).AsyncUnseen - before; got != 0 {
				t.Errorf("AsyncUnseen went up by %d, want 0", got)
			}
		})
	}
	t.Run("disconnected", func(t *testing.T) {
		before := stats(t, tr).AsyncUnseen
		if err := testns.New(t).Do(func() error { return disconnectPending(t) }); err != nil {
			t.Fatal(err)
		}
		noMoreEvents(t, tr)
		if got := stats(t, tr).AsyncUnseen - before; got != 0 {
			t.Errorf("AsyncUnseen went up by %d: a disconnect is no failure", got)
		}
	})
}

// takeError makes a non-blocking connect time out (its SYN dropped by a full
// accept queue, TCP_USER_TIMEOUT 200 ms) while holdEnd holds its change to
// CLOSE until a taker process on cpus[0] takes the error with SO_ERROR
// (late: and holds the taker's exit of getsockopt until the error's report).
// This thread connects on cpus[1] and stays there, busy, so that the
// connect's timer runs there. The failure's event must be read before the
// socket is closed.
func takeError(t *testing.T, h *holdEnd, tr *Tracer, late bool, cpus []int) error {
	t.Helper()
	_, addr := fullListener(t)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 200); err != nil {
		return err
	}
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return err
	}
	taker := startTaker(t, fd, cpus[0])
	h.arm(t, cookie, taker.cmd.Process.Pid, cpus[0], late)
	defer h.set(t, h.objs.TargetCookie, uint64(0))
	defer pinTo(t, cpus[1])()
	if err := unix.Connect(fd, addr); !errors.Is(err, unix.EINPROGRESS) {
		return fmt.Errorf("connect: %v, want EINPROGRESS (its SYN dropped)", err)
	}
	for deadline := time.Now().Add(20 * time.Second); !taker.exited.Load() && time.Now().Before(deadline); {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	if out, err := taker.result(); err != nil || out != "ETIMEDOUT" {
		return fmt.Errorf("the taker took %q (%v), want ETIMEDOUT", out, err)
	}
	switch held, errAfter := h.outcome(t); {
	case held != holdendHoldOutcomeHOLD_RELEASED:
		return fmt.Errorf("the condition was not made: hold_close ended %d (1: held until the error was taken), want 1", held)
	case errAfter != 0:
		return fmt.Errorf("the condition was not made: the socket still held error %d after the hold", errAfter)
	}
	ev := expect(t, tr, "the connect's failure, before its socket is closed", SysConnect, unix.ETIMEDOUT)
	if ev.Flags&FlagAsync == 0 || ev.SockCookie != cookie {
		t.Errorf("flags %#x cookie %d, want async and the socket's %d", ev.Flags, ev.SockCookie, cookie)
	}
	return nil
}

// takerEnv makes the test binary the taker (TestMain, takerMain).
const takerEnv = "EADDR_TEST_TAKER"

// A taker process: this test binary again, with the socket as its fd 3 and
// the write end of a pipe as fd 4, where it says it is taking.
type takerProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	exited atomic.Bool
	done   chan error
}

// startTaker starts the taker on cpu alone (it is forked from a thread
// pinned there, and every thread of its runtime inherits that) and returns
// once it is taking: started in a slow guest, it could otherwise come after
// the hold's end.
func startTaker(t *testing.T, fd, cpu int) *takerProc {
	t.Helper()
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	sock := os.NewFile(uintptr(dup), "socket")
	defer sock.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	p := &takerProc{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), takerEnv+"=1")
	p.cmd.ExtraFiles = []*os.File{sock, readyW}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine, pinned
		pinTo(t, cpu)
		started <- p.cmd.Start()
	}()
	err = <-started
	readyW.Close()
	if err != nil {
		t.Fatalf("starting the taker: %v", err)
	}
	go func() { p.done <- p.cmd.Wait(); p.exited.Store(true) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	ready.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the taker never said it was taking: %v (it printed %q)", err, p.out.String())
	}
	return p
}

// result is what the taker printed, once it has exited.
func (p *takerProc) result() (string, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return strings.TrimSpace(p.out.String()), err
	case <-time.After(10 * time.Second):
		return "", errors.New("the taker did not end")
	}
}

// takerMain is the taker: it reads SO_ERROR of its fd 3 until the connect's
// error comes (saying on fd 4 when it has begun), and prints its name.
func takerMain() int {
	ready := os.NewFile(4, "ready")
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		e, err := unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			fmt.Println("SO_ERROR:", err)
			return 1
		}
		if e != 0 {
			fmt.Println(unix.ErrnoName(unix.Errno(e)))
			return 0
		}
		if ready != nil {
			ready.Write([]byte{1})
			ready.Close()
			ready = nil
		}
	}
	fmt.Println("no error to take within 60 s")
	return 1
}

// disconnectPending disconnects a pending connect (connect with AF_UNSPEC),
// reads the socket's error (ECONNRESET) and closes it.
func disconnectPending(t *testing.T) error {
	t.Helper()
	_, addr := fullListener(t)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, addr); !errors.Is(err, unix.EINPROGRESS) {
		return fmt.Errorf("connect: %v, want EINPROGRESS", err)
	}
	unspec := unix.RawSockaddr{Family: unix.AF_UNSPEC}
	if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec)); e != 0 {
		return fmt.Errorf("connect AF_UNSPEC: %v", e)
	}
	if st := tcpState(t, fd); st != tcpClose {
		return fmt.Errorf("disconnected socket in state %d, want CLOSE", st)
	}
	e, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil || unix.Errno(e) != unix.ECONNRESET {
		return fmt.Errorf("SO_ERROR after the disconnect: %v %v, want ECONNRESET", unix.Errno(e), err)
	}
	return nil
}

// pinTo keeps the calling (locked) thread on cpu; the returned func puts
// back the CPUs it had.
func pinTo(t *testing.T, cpu int) (restore func()) {
	t.Helper()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	return func() { unix.SchedSetaffinity(0, &was) }
}

func allowedCPUs(t *testing.T) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

func stats(t *testing.T, tr *Tracer) Stats {
	t.Helper()
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// noMoreEvents fails when the tracer has an event to read.
func noMoreEvents(t *testing.T, tr *Tracer) {
	t.Helper()
	if ev, err := readOne(t, tr, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("an event more: syscall %d %s flags %#x (%v)", ev.Syscall, unix.ErrnoName(unix.Errno(ev.Err)), ev.Flags, err)
	}
}
