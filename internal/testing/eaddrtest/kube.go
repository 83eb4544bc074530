package eaddrtest

import (
	"testing"
	"time"
)

// ForComm waits d, then returns the events from processes named comm.
func (p *TraceProc) ForComm(comm string, d time.Duration) []JSONEvent {
	time.Sleep(d)
	p.Mu.Lock()
	defer p.Mu.Unlock()
	var out []JSONEvent
	for _, e := range p.Events {
		if e.Process.Comm == comm {
			out = append(out, e)
		}
	}
	return out
}

// WaitComm waits up to d for n events from processes named comm, and
// returns all of them.
func (p *TraceProc) WaitComm(comm string, n int, d time.Duration) []JSONEvent {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		out := p.ForComm(comm, 0)
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
	}
}

// NamesListed waits until p's runtime cache holds what the runtime listed
// when the trace started (eaddr_cache_entries{cache="cri_ids"} > 0, one
// list stores every container at once): from then on, a failure in a
// container that existed before the trace started is named as soon as it
// is read, and a name filter decides it then, also in the drain at stop.
func (p *TraceProc) NamesListed(t *testing.T) {
	t.Helper()
	base := p.MetricsURL(t)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, m := range Scrape(t, base)["eaddr_cache_entries"].GetMetric() {
			if Labels(m)["cache"] == "cri_ids" && m.GetGauge().GetValue() > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime's containers not listed within 60s; stderr:\n%s", p.Stderr.String())
		}
	}
}
