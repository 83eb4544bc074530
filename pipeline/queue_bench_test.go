package pipeline

import (
	"testing"
	"time"

	"github.com/eaddr/eaddr/diagnose"
)

// BenchmarkDiagnosisWaitStorm: a storm of one failure whose netns snapshot
// is being taken, so that every event waits for it (the diagnosis wait), in
// batches of 256 that go out when it comes; a new interval each batch. The
// cost per event of reading, holding and writing it, without root.
func BenchmarkDiagnosisWaitStorm(b *testing.B) {
	g := newWaitsRig(b, Config{DiagnoseEvery: time.Second, DiagnoseWait: time.Hour})
	g.rt.named[1] = true
	verdict := &diagnose.Diagnosis{Verdict: "ephemeral ports exhausted (bench)"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		g.failAs(1, 5, "curl", 8080)
		if len(g.r.diagHold) < 256 && i != b.N-1 {
			continue
		}
		for len(g.r.diag.reqs) > 0 {
			<-g.r.diag.reqs
		}
		for _, h := range g.r.diagHold {
			g.r.diag.results[h.ticket] = verdict
		}
		g.at(g.now)
		g.now = g.now.Add(2 * time.Second) // the next batch waits for a new snapshot
		g.out = g.out[:0]
	}
}

// BenchmarkNamesWaitStorm: the same storm while the pod's names are being
// asked of the runtime: every event waits in the hold queue, in batches of
// 256 that go out when the answer comes.
func BenchmarkNamesWaitStorm(b *testing.B) {
	g := newWaitsRig(b, Config{NamesWait: time.Hour})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tid := uint32(1 + i/256) // a new container each batch: its names pending
		g.failAs(tid, 5, "curl", 8080)
		if len(g.r.hold.q) < 256 && i != b.N-1 {
			continue
		}
		g.rt.named[tid], g.rt.answered = true, g.rt.answered+1
		g.at(g.now)
		g.out = g.out[:0]
	}
}
