package explain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
)

// A program whose binary is past the bounds is not analysed: the Detector
// counts it once, does not look at it again when the negative cache would
// have expired, and its events say why in client_unknown, without
// allocating.
func TestDetectorGivesUpOnHostileBinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostile")
	if err := os.WriteFile(path, (&craftELF{nullProgs: 2000}).bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	// The process is gone: the Detector finds the file by argv[0] under
	// the parent's root (this process).
	ev := &decode.Event{PID: 1 << 30, PPID: uint32(os.Getpid()), MntNS: selfMntNS(t), ExeName: []byte("hostile"),
		ExeIno: st.Ino, ExeDev: st.Dev, Args: []byte(path + "\x00"), Syscall: decode.Connect, Errno: decode.EADDRNOTAVAIL}
	x, err := NewExplainer()
	if err != nil {
		t.Fatal(err)
	}
	d := x.Detector
	now := time.Now()
	d.now = func() time.Time { return now }
	var ex Explanation
	x.Explain(ev, &ex, false)
	const why = "the program's binary was not analysed: it has 2000 program headers, more than the 1024 eaddr reads"
	if ex.Binary != nil || ex.Client != nil || !strings.HasPrefix(ex.ClientUnknown, why) {
		t.Errorf("binary %+v, client %v, client_unknown %q; want none, and %q", ex.Binary, ex.Client, ex.ClientUnknown, why)
	}
	t.Logf("client_unknown: %s", ex.ClientUnknown)
	now = now.Add(time.Hour) // past NegativeTTL
	if n := testing.AllocsPerRun(100, func() { x.Explain(ev, &ex, false) }); n != 0 {
		t.Errorf("explaining its events allocates %.1f times, want 0", n)
	}
	// The file is found under two roots (this process's, and pid 1's or
	// another process's of the same mount namespace): it is analysed under
	// the first only.
	if d.Lookups != 1 || d.finder.analyses != 1 || d.BinariesGivenUp() != 1 || !strings.HasPrefix(ex.ClientUnknown, why) {
		t.Errorf("%d lookups, %d analyses, %d given up, client_unknown %q; want it looked at, analysed and counted once",
			d.Lookups, d.finder.analyses, d.BinariesGivenUp(), ex.ClientUnknown)
	}

	// An unreadable binary still says so.
	var none Explanation
	x.Explain(&decode.Event{PID: 1 << 30, ExeIno: 1, ExeDev: 1, ExeName: []byte("gone")}, &none, false)
	if !strings.HasPrefix(none.ClientUnknown, "the program's binary could not be read") {
		t.Errorf("unreadable binary: %q", none.ClientUnknown)
	}
}

// A binary given up on for time (a slow file system) is looked at again
// after NegativeTTL, and counted again.
func TestDetectorRetriesAfterTimeBudget(t *testing.T) {
	d := newDetector()
	now := time.Now()
	d.now = func() time.Time { return now }
	ev := &decode.Event{PID: 1 << 30, PPID: 1 << 30, ExeName: []byte("slow"), ExeIno: 777, ExeDev: 1}
	e := &binEntry{at: now}
	if !e.gaveUpOn(&limitError{why: "reading it took longer than 1s", retry: true}) || !e.retry {
		t.Fatal("the time budget's give-up is not retried")
	}
	d.cache[exeKey{1, 777}] = e
	d.binaryOf(ev)
	if d.Lookups != 0 {
		t.Errorf("looked again within NegativeTTL")
	}
	now = now.Add(d.NegativeTTL)
	d.binaryOf(ev)
	if d.Lookups != 1 {
		t.Errorf("not looked at again after NegativeTTL")
	}
	if e := (&binEntry{}); !e.gaveUpOn(gaveUp("it has 2000 program headers")) || e.retry {
		t.Errorf("a count past its bound is retried")
	}
}
