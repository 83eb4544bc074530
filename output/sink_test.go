package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// record is one JSON line of size bytes (newline included), numbered i.
func record(i, size int) []byte {
	b := fmt.Appendf(nil, `{"i":%d,"pad":"`, i)
	b = append(b, strings.Repeat("x", max(0, size-len(b)-3))...)
	return append(b, "\"}\n"...)
}

// wholeLines checks that got is whole JSON lines and returns their count.
func wholeLines(t *testing.T, got []byte) int {
	t.Helper()
	if len(got) > 0 && got[len(got)-1] != '\n' {
		t.Errorf("the output ends in a cut line: ...%q", got[max(0, len(got)-60):])
	}
	n := 0
	for _, l := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if !json.Valid(l) {
			t.Errorf("line %d is not JSON: %.80q", n+1, l)
		}
		n++
	}
	return n
}

// Into a pipe read as fast as it can be, by a writer paced to it, every
// record arrives whole and delivered counts it; records of 1 KB, 5 KB (a full explain: more than
// PIPE_BUF) and 100 KB (more than the pipe holds: it is grown) alike.
func TestSinkPipeWholeLines(t *testing.T) {
	for _, size := range []int{1000, 5000, 100 << 10} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&got, r); close(done) }()
		sk := NewSink(w, 64<<10, 64, nil)
		if sk.pipe == nil {
			t.Fatal("a pipe was not reopened non-blocking")
		}
		n := 5000
		if size > 64<<10 {
			n = 200 // each waits for an empty pipe
		}
		start := time.Now()
		for i := range n {
			sk.Add(append(sk.Buf(), record(i, size)...), 1)
			if i%16 == 15 {
				sk.Flush()
				for sk.queued.Load() > 32 { // pace to the reader: measure throughput, not the queue
					time.Sleep(50 * time.Microsecond)
				}
			}
		}
		sk.Close(10 * time.Second)
		took := time.Since(start)
		w.Close()
		<-done
		r.Close()
		lines := wholeLines(t, got.Bytes())
		d, dr := sk.delivered.Load(), sk.dropped.Load()
		t.Logf("%d records of %d bytes into a pipe: %d delivered, %d dropped, %d received, %v (%.0f lines/s)", n, size, d, dr, lines, took.Round(time.Millisecond), float64(d)/took.Seconds())
		if int(d) != lines || int(d) != n || dr != 0 {
			t.Errorf("size %d: delivered %d, dropped %d, received %d lines of %d", size, d, dr, lines, n)
		}
	}
}

// A reader that never reads: close gives up after its timeout, the write
// in progress leaves nothing behind, and every record is delivered (in the
// pipe, whole) or dropped.
func TestSinkStuckReader(t *testing.T) {
	for _, size := range []int{700, 5000} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		sk := NewSink(w, 64<<10, 64, nil)
		const n = 1000
		for i := range n {
			sk.Add(append(sk.Buf(), record(i, size)...), 1)
			sk.Flush()
		}
		// close gives up after its timeout: that it returns at all with a
		// reader that never reads is what is checked (a minute fails a hang;
		// how soon after 300 ms it returns is the machine's).
		closed := make(chan struct{})
		go func() { sk.Close(300 * time.Millisecond); close(closed) }()
		select {
		case <-closed:
		case <-time.After(time.Minute):
			t.Fatalf("size %d: close did not return within a minute with a stuck reader", size)
		}
		w.Close()
		got, _ := io.ReadAll(r)
		r.Close()
		lines := wholeLines(t, got)
		d, dr := sk.delivered.Load(), sk.dropped.Load()
		t.Logf("%d records of %d bytes, stuck reader: %d delivered (%d bytes in the pipe), %d dropped", n, size, d, len(got), dr)
		if int(d) != lines || d+dr != n || dr == 0 {
			t.Errorf("size %d: delivered %d, dropped %d, %d lines in the pipe, of %d", size, d, dr, lines, n)
		}
	}
}

// Into an empty pipe a batch goes in one write of up to the pipe's
// capacity; into one that still holds bytes, in PIPE_BUF writes. Nothing
// reads until the end, so the pipe's state is what the test made it.
func TestSinkEmptyPipeOneWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 1<<20); err != nil {
		t.Skipf("cannot make the pipe 1 MiB: %v", err)
	}
	sk := NewSink(w, 64<<10, 4, nil)
	const size, n = 1000, 60 // 60,000 bytes: one batch, under the 64 KiB flush
	for i := range n {
		sk.Add(append(sk.Buf(), record(i, size)...), 1)
	}
	sk.Flush()
	waitSettled(t, sk, n)
	if got := sk.writes.Load(); got != 1 {
		t.Errorf("%d records of %d bytes into an empty pipe took %d writes, want 1", n, size, got)
	}
	for i := range n { // the pipe holds 60,000 bytes now
		sk.Add(append(sk.Buf(), record(n+i, size)...), 1)
	}
	sk.Flush()
	waitSettled(t, sk, 2*n)
	if got, want := sk.writes.Load()-1, uint64(n*size+pipeBuf-1)/pipeBuf+1; got < want-1 {
		t.Errorf("into a pipe holding bytes, %d records of %d bytes took %d writes, want PIPE_BUF ones (about %d)", n, size, got, want)
	}
	sk.Close(10 * time.Second)
	w.Close()
	got, _ := io.ReadAll(r)
	if lines := wholeLines(t, got); lines != 2*n || sk.delivered.Load() != 2*n {
		t.Errorf("received %d lines, delivered %d, of %d", lines, sk.delivered.Load(), 2*n)
	}
}

// waitSettled waits until the writer has written or dropped n events.
func waitSettled(t *testing.T, sk *Sink, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); sk.delivered.Load()+sk.dropped.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the writer settled %d of %d events in a minute", sk.delivered.Load()+sk.dropped.Load(), n)
		}
	}
}
