package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Stats reads each program's kernel counters under its own name: with the
// kernel's run counts on, 3000 failing binds of this test add at least
// 3000 runs to the program read as exit_bind (the machine's other binds
// only add to it). Read in the wrong order, that program would be
// another, whose runs in those few milliseconds (the machine's connects,
// its socket state changes) are far fewer. The skipped runs themselves
// cannot be made on demand (the kernel skips a run only when it cannot
// nest it); their read is the same call's.
func TestProgramsInOrder(t *testing.T) {
	testenv.RequireRoot(t) // before EnableStats, which needs it too
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enabling BPF statistics: %v", err)
	}
	defer stats.Close()
	tr := newTracer(t, Options{PID: 1 << 30}) // no events: only the runs count
	runs := func() (n [len(Programs)]uint64) {
		for i, p := range tr.programs() {
			s, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			n[i] = s.RunCount
		}
		return n
	}
	before := runs()
	const calls = 3000
	for range calls {
		failBind(t)
	}
	after := runs()
	d := func(name string) uint64 {
		for i, n := range Programs {
			if n == name {
				return after[i] - before[i]
			}
		}
		t.Fatalf("no program %s", name)
		return 0
	}
	if d("exit_bind") < calls {
		t.Errorf("runs during %d failing binds: exit_bind %d (exit_connect %d); want exit_bind's at least %d", calls, d("exit_bind"), d("exit_connect"), calls)
	}
	if _, err := tr.Stats(); err != nil {
		t.Errorf("Stats: %v", err)
	}
}
