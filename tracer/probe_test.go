//go:build linux

package tracer

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// On a kernel without one of the features eaddr needs, Probe says so in one
// line that names it. Each probe is made to answer "not supported" in turn,
// the others "supported", so that this runs on any kernel, also one that
// lacks some for real (TestProbeThisKernel is about the real answers); with
// every probe answering "supported", Probe must pass: the sentinel that the
// rest of Probe (capabilities, BTF, tracepoints) lets the checks run.
func TestProbeNamesWhatIsMissing(t *testing.T) {
	testenv.RequireRoot(t)
	saved := append(kernelFeatures[:0:0], kernelFeatures...)
	t.Cleanup(func() { copy(kernelFeatures, saved) })
	answer := func(missing string, other error) int {
		n := 0
		for i := range kernelFeatures {
			kernelFeatures[i].check = func() error { return other }
			if missing != "" && strings.Contains(kernelFeatures[i].what, missing) {
				kernelFeatures[i].check = func() error { return ebpf.ErrNotSupported }
				n++
			}
		}
		return n
	}
	answer("", nil)
	if err := Probe(nil); err != nil {
		t.Fatalf("Probe with every feature there: %v", err)
	}
	for _, name := range []string{"BPF ring buffer", "bpf_get_current_task_btf", "bpf_task_pt_regs"} {
		t.Run(name, func(t *testing.T) {
			if n := answer(name, nil); n != 1 {
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
	answer("", errors.New("probe failed for another reason"))
	if err := Probe(nil); err != nil {
		t.Errorf("an inconclusive probe stopped eaddr: %v", err)
	}
}

// The real probes on this kernel answer what it is known to have.
// EADDR_KERNEL_LACKS names, comma separated, the features the kernel lacks
// (make kernels sets it for each entry: the Debian 11 entry, Linux 5.10,
// lacks bpf_get_current_task_btf and bpf_task_pt_regs); unset or empty, it
// has them all. Each lacking feature's probe must say "not supported", every
// other one "supported" (an inconclusive answer fails too), and Probe must
// refuse in one line that names the first missing one, or pass.
func TestProbeThisKernel(t *testing.T) {
	testenv.RequireRoot(t)
	lacks := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("EADDR_KERNEL_LACKS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			lacks[s] = true
		}
	}
	named := map[string]int{}
	first := ""
	for _, f := range kernelFeatures {
		lacked := false
		for s := range lacks {
			if strings.Contains(f.what, s) {
				named[s]++
				lacked = true
			}
		}
		err := f.check()
		switch {
		case lacked && !errors.Is(err, ebpf.ErrNotSupported):
			t.Errorf("%s (Linux %s): the probe says %v; this kernel is said to lack it", f.what, f.version, err)
		case !lacked && err != nil:
			t.Errorf("%s (Linux %s): the probe says %v; this kernel is said to have it", f.what, f.version, err)
		}
		if lacked && first == "" {
			first = f.what
		}
		t.Logf("%s (Linux %s): %v", f.what, f.version, err)
	}
	for s := range lacks {
		if named[s] != 1 {
			t.Errorf("EADDR_KERNEL_LACKS names %q, which %d of Probe's features are", s, named[s])
		}
	}
	err := Probe(nil)
	t.Logf("Probe on %s: %v", kernelRelease(), err)
	if first == "" {
		if err != nil {
			t.Errorf("Probe on this kernel: %v", err)
		}
		return
	}
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "kernel "+kernelRelease()+" is too old: eaddr needs "+first+" ") {
		t.Errorf("Probe: %v; want one line: kernel %s is too old: eaddr needs %s (...)", err, kernelRelease(), first)
	}
}
