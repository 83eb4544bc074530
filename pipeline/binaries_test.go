package pipeline

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/tracer"
)

// A failing program whose binary is past explain's bounds (2000 program
// headers): its event says why it names no client, and the binary is
// counted in the stopped line and eaddr_binaries_given_up_total.
func TestBinariesGivenUp(t *testing.T) {
	elf := make([]byte, 64+2000*56) // ELF64 LE header, 2000 PT_NULL program headers
	copy(elf, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(elf[16:], 2)      // ET_EXEC
	le.PutUint16(elf[18:], 62)     // EM_X86_64
	le.PutUint32(elf[20:], 1)      // EV_CURRENT
	le.PutUint64(elf[0x20:], 64)   // e_phoff
	le.PutUint16(elf[0x36:], 56)   // e_phentsize
	le.PutUint16(elf[0x38:], 2000) // e_phnum
	path := filepath.Join(t.TempDir(), "hostile")
	if err := os.WriteFile(path, elf, 0o755); err != nil {
		t.Fatal(err)
	}

	g := newWaitsRig(t, Config{})
	g.withMetrics(t)
	g.rt.named[7], g.rt.named[8] = true, true
	g.withBins(t, 1, binQueue, findBinary) // a real analyser
	raw := g.exeRaw(t, 7, path)            // gone: found by argv[0] beneath this test's root
	g.r.handle(&raw)
	for deadline := time.Now().Add(time.Minute); len(g.out) == 0 && time.Now().Before(deadline); time.Sleep(holdPoll) {
		g.at(g.now) // the clock stands: the event waits for the analysis
	}
	raw.Tid = 8
	g.r.handle(&raw) // the second event finds it in the cache: not counted again

	const why = `"client_unknown":"the program's binary was not analysed: it has 2000 program headers, more than the 1024 eaddr reads`
	if len(g.out) != 2 || !strings.Contains(g.out[0].line, why) || !strings.Contains(g.out[1].line, why) {
		t.Fatalf("lines %+v; want two saying %s", g.out, why)
	}
	s := Stats{BinariesGivenUp: g.r.binariesGivenUp()}
	attrs := g.r.stoppedAttrs(s)
	if i := slices.Index(attrs, any("binaries_given_up")); i < 0 || attrs[i+1] != uint64(1) {
		t.Errorf("stopped line %v; want binaries_given_up 1", attrs)
	}
	g.r.updateMetrics(tracer.Stats{})
	fams, err := g.r.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(fams, func(f *dto.MetricFamily) bool { return f.GetName() == "eaddr_binaries_given_up_total" })
	if i < 0 || len(fams[i].Metric) != 1 || fams[i].Metric[0].GetCounter().GetValue() != 1 {
		t.Errorf("eaddr_binaries_given_up_total: %v; want one counter at 1", fams[max(i, 0)])
	}
	if attrs := g.r.stoppedAttrs(Stats{}); slices.Contains(attrs, any("binaries_given_up")) {
		t.Errorf("stopped line %v names binaries_given_up with none", attrs)
	}
}
