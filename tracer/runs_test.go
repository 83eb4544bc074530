package tracer

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testenv"
)

// Stats reads each program's kernel counters under its own name: with the
// kernel's run counts on, 300 failing binds of this test add at least 300
// runs to exit_bind, and (the machine's other connects in that moment
// being far fewer) fewer than 300 to exit_connect. The skipped runs
// themselves cannot be made on demand (the kernel skips a run only when a
// BPF program is already running on that CPU); their read is the same
// call's.
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
	const calls = 300
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
	if d("exit_bind") < calls || d("exit_connect") >= calls {
		t.Errorf("runs during %d failing binds: exit_bind %d, exit_connect %d; want exit_bind's at least %d and exit_connect's fewer", calls, d("exit_bind"), d("exit_connect"), calls)
	}
	if _, err := tr.Stats(); err != nil {
		t.Errorf("Stats: %v", err)
	}
}
