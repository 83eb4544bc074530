package connwait

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// connectNB starts a non-blocking connect to addr on loopback and returns
// its socket, closed at cleanup.
func connectNB(t *testing.T, port int) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) && !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatal(err)
	}
	return fd
}

// A connect to a listener: nil; to a port nobody listens on: ECONNREFUSED
// as a unix.Errno.
func TestOutcome(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := Outcome(connectNB(t, port), time.Minute); err != nil {
		t.Errorf("to a listener: %v, want nil", err)
	}
	ln.Close()
	err = Outcome(connectNB(t, port), time.Minute)
	var errno unix.Errno
	if !errors.As(err, &errno) || errno != unix.ECONNREFUSED {
		t.Errorf("to a closed port: %v, want ECONNREFUSED", err)
	}
}

// A descriptor that never becomes writable (a full pipe's write end) has
// no outcome: Outcome says so once d has passed, and signals sent to its
// thread all along (each poll they interrupt returns EINTR) do not end the
// wait early. Without the EINTR retry the first signal ends it.
func TestOutcomeWaitsThroughSignals(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	for {
		if _, err := unix.Write(p[1], make([]byte, 1<<16)); errors.Is(err, unix.EAGAIN) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid, done := unix.Gettid(), make(chan struct{})
	var signals atomic.Int64
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				unix.Tgkill(unix.Getpid(), tid, unix.SIGURG) // the runtime's own preemption signal, ignored by it otherwise
				signals.Add(1)
			}
		}
	}()
	err := Outcome(p[1], 300*time.Millisecond)
	close(done)
	if err == nil || !strings.Contains(err.Error(), "no outcome") {
		t.Fatalf("a descriptor never writable, %d signals sent meanwhile: %v, want no outcome within the bound", signals.Load(), err)
	}
}
