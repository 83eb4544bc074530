package eaddrtest

import (
	"os"
	"regexp"
	"testing"
	"time"
)

// RmdirRetry removes a cgroup directory, retrying on EBUSY (the kernel may
// still be tearing down a just-reaped task, later on a busy machine) for up
// to 30 s.
func RmdirRetry(dir string) error {
	var err error
	for range 3000 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// Arrivals records when each event line was read, to compare with its time.
type Arrivals struct {
	delays []time.Duration
	Worst  time.Duration
	p      *TraceProc
}

func (p *TraceProc) ArrivalTimes() *Arrivals {
	a := &Arrivals{p: p}
	p.Mu.Lock()
	p.onLine = func(line string) {
		m := TimeRe.FindStringSubmatch(line)
		if m == nil {
			return
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			return
		}
		d := time.Since(at)
		a.delays = append(a.delays, d)
		a.Worst = max(a.Worst, d)
	}
	p.Mu.Unlock()
	return a
}

var TimeRe = regexp.MustCompile(`^\{"schema":\d+,"kind":"failure","time":"([^"]+)"`)

// Count is the number of event lines read.
func (a *Arrivals) Count() int {
	a.p.Mu.Lock()
	defer a.p.Mu.Unlock()
	return len(a.delays)
}

// WaitFor returns the first event for which match is true, within d.
func (p *TraceProc) WaitFor(t *testing.T, d time.Duration, match func(JSONEvent) bool) JSONEvent {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.Mu.Lock()
		for _, e := range p.Events {
			if match(e) {
				p.Mu.Unlock()
				return e
			}
		}
		p.Mu.Unlock()
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	t.Fatalf("no matching event within %v; events: %+v\nstderr: %s", d, p.Events, p.Stderr.String())
	return JSONEvent{}
}
