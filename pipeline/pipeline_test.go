package pipeline

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// Run returns the totals the stopped line logs: one failure of this process,
// traced with this process as the only pid, is read, written and delivered.
func TestRunReturnsStats(t *testing.T) {
	testenv.RequireRoot(t)
	c := Config{Tracer: tracer.Options{PID: uint32(os.Getpid()), RingSize: tracer.DefaultRingSize}, Flush: 10 * time.Millisecond,
		MetricsMaxSeries: 1, Rate: 100, NodePortLo: 30000, NodePortHi: 32767}
	c.Tracer.WakeupBytes = 64 << 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attached, seen := make(chan struct{}), make(chan struct{}, 16)
	hooks := Hooks{Attached: func() { close(attached) }, Event: func(*decode.Event, *explain.Explanation, []byte) { seen <- struct{}{} }}
	type result struct {
		s   Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := Run(ctx, c, io.Discard, slog.New(slog.DiscardHandler), hooks)
		done <- result{s, err}
	}()
	select {
	case <-attached:
	case r := <-done:
		t.Fatalf("Run ended before attaching: %v", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("not attached within 30s")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	port := 20000 + rand.IntN(20000)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{192, 0, 2, 1}}); err == nil {
		t.Fatal("bind to 192.0.2.1 succeeded")
	}
	unix.Close(fd)
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the failure was not written within 10s")
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
	s := r.s
	if r.err != nil || s.Events < 1 || s.Written < 1 || s.Delivered != s.Written || s.Lost != 0 ||
		s.Written+s.Filtered+s.FilteredUnresolved+s.Suppressed != s.Events {
		t.Errorf("Run: %+v, %v; want at least one event, all written and delivered, nothing lost", s, r.err)
	}
}
