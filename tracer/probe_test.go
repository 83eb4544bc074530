//go:build linux

package tracer

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/eaddr/eaddr/internal/testenv"
)

// On a kernel without one of the features eaddr needs, Probe says so in one
// line that names it. No kernel here lacks any (Debian has no kernel older
// than 6.1 to boot), so each probe is made to answer "not supported" in turn;
// the real probes must all pass on this kernel first, the sentinel that the
// rest of Probe (capabilities, BTF, tracepoints) lets the checks run.
func TestProbeNamesWhatIsMissing(t *testing.T) {
	testenv.RequireRoot(t)
	if err := Probe(nil); err != nil {
		t.Fatalf("Probe on this kernel: %v", err)
	}
	saved := append(kernelFeatures[:0:0], kernelFeatures...)
	t.Cleanup(func() { copy(kernelFeatures, saved) })
	for _, name := range []string{"BPF ring buffer", "bpf_get_current_task_btf", "bpf_task_pt_regs"} {
		t.Run(name, func(t *testing.T) {
			copy(kernelFeatures, saved)
			n := 0
			for i := range kernelFeatures {
				if strings.Contains(kernelFeatures[i].what, name) {
					kernelFeatures[i].check = func() error { return ebpf.ErrNotSupported }
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d probes for %s, want 1", n, name)
			}
			err := Probe(nil)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "too old") || strings.Contains(err.Error(), "\n") {
				t.Errorf("Probe without %s: %v; want one line naming it", name, err)
			}
			t.Logf("%v", err)
		})
	}
	// Inconclusive (not ErrNotSupported): logged, loading goes on.
	copy(kernelFeatures, saved)
	kernelFeatures[0].check = func() error { return errors.New("probe failed for another reason") }
	if err := Probe(nil); err != nil {
		t.Errorf("an inconclusive probe stopped eaddr: %v", err)
	}
}
