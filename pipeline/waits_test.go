package pipeline

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/explain"
	"github.com/eaddr/eaddr/output"
	"github.com/eaddr/eaddr/pod"
	"github.com/eaddr/eaddr/tracer"
)

// The waits of the trace loop, for names and for snapshots, on a clock the
// test moves: no root, no runtime, nothing that depends on the machine's
// speed.

// fakeRuntime is the attributor: it stands for pods.Map and the runtime's
// answers. Every event is in a pod cgroup; its names are pending until the
// test names its thread. It counts the calls.
type fakeRuntime struct {
	named    map[uint32]bool // by tid
	answered uint64
	maps     map[uint32]int // Map calls, by tid
}

var (
	unnamedPod = decode.Pod{UID: "uid-1", ContainerID: "cid-1"}
	namedPod   = decode.Pod{UID: "uid-1", ContainerID: "cid-1", Name: "web", Namespace: "shop", Container: "app"}
)

func (f *fakeRuntime) Map(ev *decode.Event, final bool) bool {
	f.maps[ev.TID]++
	ev.Pod, ev.PodNamesUnresolved = &unnamedPod, ""
	switch {
	case f.named[ev.TID]:
		ev.Pod = &namedPod
	case !final:
		return true
	default:
		ev.PodNamesUnresolved = pod.NamesWait
	}
	return false
}

func (f *fakeRuntime) Answered() uint64 { return f.answered }

// written is what one emitted event said.
type written struct {
	tid  uint32
	line string
}

type waitsRig struct {
	r   *traceRun
	rt  *fakeRuntime
	now time.Time
	out []written
}

// newWaitsRig is a trace loop without a tracer: events go in through
// handle, out through the Event hook.
func newWaitsRig(t testing.TB, c Config) *waitsRig {
	c.defaults()
	g := &waitsRig{rt: &fakeRuntime{named: map[uint32]bool{}, maps: map[uint32]int{}}, now: time.Unix(1_700_000_000, 0)}
	r := &traceRun{c: c, log: slog.New(slog.DiscardHandler), limits: newLimitBook(false, false), hold: newHoldQueue(holdMax),
		dec: decode.NewDecoder(nil), diagLate: lateDiagnosis(c.DiagnoseWait), held: newEventPool(holdMax)}
	r.now = func() time.Time { return g.now }
	r.attr = g.rt
	r.consumers = []consumer{eventHook(func(ev *decode.Event, _ *explain.Explanation, line []byte) {
		g.out = append(g.out, written{ev.TID, string(line)})
	})}
	r.sk = output.NewSink(io.Discard, 64<<10, 64, nil)
	t.Cleanup(func() { r.sk.Close(time.Second) })
	if c.DiagnoseEvery > 0 {
		done := make(chan struct{})
		close(done) // no worker goroutine: the test answers for it
		r.diag = &diagWorker{pool: newEventPool(64), reqs: make(chan diagReq, 64), done: done, results: map[uint64]*diagnose.Diagnosis{}, abandoned: map[uint64]bool{}}
		r.share, r.seenNetNS = newDiagShare(c.DiagnoseEvery), map[uint32]bool{}
	}
	g.r = r
	return g
}

// fail is a connect() of thread tid toward 127.0.0.1:8080 failing with
// EADDRNOTAVAIL in netns.
func (g *waitsRig) fail(tid, netns uint32) { g.failAs(tid, netns, "", 8080) }

// failAs is fail by a process named comm, toward port.
func (g *waitsRig) failAs(tid, netns uint32, comm string, port uint16) {
	raw := g.raw(tid, netns, comm, port)
	g.r.handle(&raw)
}

// raw is the record of that failure.
func (g *waitsRig) raw(tid, netns uint32, comm string, port uint16) tracer.RawEvent {
	raw := tracer.RawEvent{Tgid: 100, Tid: tid, Netns: netns, Err: int32(decode.EADDRNOTAVAIL), Syscall: tracer.SysConnect,
		Flags: tracer.FlagAddr, AddrCopied: 16, Addrlen: 16, BootNs: uint64(g.now.UnixNano())}
	copy(raw.Addr[:], []byte{2, 0, byte(port >> 8), byte(port), 127, 0, 0, 1}) // sockaddr_in: AF_INET, port, 127.0.0.1
	for i, c := range []byte(comm) {
		raw.Comm[i] = int8(c)
	}
	return raw
}

// at moves the clock to t and lets the loop look, as after a Read.
func (g *waitsRig) at(t time.Time) {
	g.now = t
	g.r.release(false)
	g.r.releaseDiag(false)
	g.r.releaseBins(false)
}

func (g *waitsRig) tids() []uint32 {
	var tids []uint32
	for _, w := range g.out {
		tids = append(tids, w.tid)
	}
	return tids
}

// An event whose names the runtime does not give waits exactly the names
// wait, no less, and goes out at the first look after it with the reason;
// one whose names come goes out at the look after the answer; while any
// waits the reader looks every holdPoll, not every flush interval; what the
// loop recorded is what happened, also when it came back late.
func TestNamesWait(t *testing.T) {
	for _, wait := range []time.Duration{0, 2 * time.Second} {
		g := newWaitsRig(t, Config{NamesWait: wait})
		wait = g.r.c.NamesWait
		t0 := g.now
		if d := g.r.readWait(time.Second); d != time.Second {
			t.Errorf("nothing held: Read waits %v, want the flush interval", d)
		}
		g.fail(1, 5)
		if d := g.r.readWait(time.Second); d != holdPoll {
			t.Errorf("an event held: Read waits %v, want %v", d, holdPoll)
		}
		g.at(t0.Add(wait - time.Nanosecond))
		if len(g.out) != 0 {
			t.Fatalf("wait %v: written %v before its names wait was over", wait, g.tids())
		}
		g.at(t0.Add(wait))
		if len(g.out) != 1 || !strings.Contains(g.out[0].line, `"names_unresolved":"`+pod.NamesWait+`"`) {
			t.Fatalf("wait %v: at its end, written %+v; want the event, without names and saying why", wait, g.out)
		}
		if g.r.hold.waitMax != wait || g.r.hold.held != 1 {
			t.Errorf("wait %v: recorded %v for %d held, want %v for 1", wait, g.r.hold.waitMax, g.r.hold.held, wait)
		}

		// Two in order; the second's names come: both go out at the look
		// after the answer, the named one with its names.
		t1 := t0.Add(10 * time.Second)
		g.at(t1)
		g.fail(2, 5)
		g.at(t1.Add(100 * time.Millisecond))
		g.fail(3, 5)
		g.rt.named[3], g.rt.answered = true, g.rt.answered+1
		g.at(t1.Add(101 * time.Millisecond))
		if got := g.tids(); len(got) != 2 || got[1] != 3 || !strings.Contains(g.out[1].line, `"name":"web"`) {
			t.Fatalf("wait %v: after the runtime named tid 3: written %v; want tid 3, named, and tid 2 still waiting", wait, got)
		}
		g.at(t1.Add(wait))
		if got := g.tids(); len(got) != 3 || got[2] != 2 {
			t.Fatalf("wait %v: written %v; want tid 2 at the end of its wait", wait, got)
		}

		// A reader that comes back 3 s late (a busy node): the event goes
		// out then, and the record says 3 s.
		t2 := t1.Add(10 * time.Second)
		g.at(t2)
		g.fail(4, 5)
		g.at(t2.Add(wait + 3*time.Second))
		if len(g.out) != 4 || g.r.hold.waitMax != wait+3*time.Second {
			t.Errorf("wait %v: late look: %d written, recorded %v; want 4 and %v", wait, len(g.out), g.r.hold.waitMax, wait+3*time.Second)
		}
		if s := g.r.hold; s.held != 4 || s.overflow != 0 {
			t.Errorf("wait %v: %d held, %d not awaited; want 4 and 0", wait, s.held, s.overflow)
		}
	}
}

// An event waits for its netns snapshot exactly the diagnosis wait and then
// goes out saying so, with the wait in its words; one whose snapshot comes
// goes out with it at the next look; both waits are recorded.
func TestDiagnoseWait(t *testing.T) {
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		g := newWaitsRig(t, Config{DiagnoseEvery: time.Second, DiagnoseWait: wait})
		wait = g.r.c.DiagnoseWait
		g.rt.named[1], g.rt.named[2] = true, true
		t0 := g.now
		g.fail(1, 5)
		if len(g.r.diagHold) != 1 {
			t.Fatalf("wait %v: the event does not wait for its snapshot (%d held)", wait, len(g.r.diagHold))
		}
		g.at(t0.Add(wait - time.Nanosecond))
		if len(g.out) != 0 {
			t.Fatalf("wait %v: written before its snapshot wait was over", wait)
		}
		g.at(t0.Add(wait))
		if len(g.out) != 1 || !strings.Contains(g.out[0].line, "took longer than "+wait.String()) {
			t.Fatalf("wait %v: at its end, written %+v; want the event saying its snapshot took longer than %v", wait, g.out, wait)
		}
		if g.r.share.late != 1 || g.r.share.waitMax != wait {
			t.Errorf("wait %v: late %d, recorded %v; want 1 and %v", wait, g.r.share.late, g.r.share.waitMax, wait)
		}

		t1 := t0.Add(10 * time.Second)
		g.at(t1)
		g.fail(2, 6) // another netns: a snapshot of its own
		ticket := g.r.diagHold[0].ticket
		g.r.diag.results[ticket] = &diagnose.Diagnosis{Verdict: "ephemeral ports exhausted (test)"}
		g.at(t1.Add(10 * time.Millisecond))
		if len(g.out) != 2 || !strings.Contains(g.out[1].line, "ephemeral ports exhausted (test)") {
			t.Fatalf("wait %v: with its snapshot there, written %+v", wait, g.out)
		}
		if g.r.share.late != 1 || g.r.share.waitMax != wait {
			t.Errorf("wait %v: late %d, recorded %v; want 1 and %v", wait, g.r.share.late, g.r.share.waitMax, wait)
		}
	}
}

// The queues keep decoded events, not raw ones decoded again: each held
// event, and the copy the diagnosis worker gets, keeps its own comm and
// address while later events are decoded into the reader's Event.
func TestHeldEventsKeepTheirBytes(t *testing.T) {
	g := newWaitsRig(t, Config{DiagnoseEvery: time.Second, NamesWait: time.Second, DiagnoseWait: time.Second})
	t0 := g.now
	g.failAs(1, 5, "alpha", 8080) // waits for its names
	g.rt.named[2] = true
	g.failAs(2, 6, "bravo", 9090) // named: waits for its snapshot
	req := <-g.r.diag.reqs        // the worker's copies: alpha's netns, then its prefetch
	for req.seen {
		req = <-g.r.diag.reqs
	}
	if string(req.ev.Comm) != "alpha" || req.ev.Remote.IP.Port() != 8080 {
		t.Errorf("the worker's copy of alpha's event reads %q toward %v", req.ev.Comm, req.ev.Remote.IP)
	}
	g.at(t0.Add(time.Second)) // alpha's names wait ends: it waits for its snapshot too
	for _, h := range g.r.diagHold {
		g.r.diag.results[h.ticket] = &diagnose.Diagnosis{Verdict: "test"}
	}
	g.at(t0.Add(time.Second + time.Millisecond))
	want := map[uint32]string{1: `"comm":"alpha"`, 2: `"comm":"bravo"`}
	port := map[uint32]string{1: `"port":8080`, 2: `"port":9090`}
	if len(g.out) != 2 {
		t.Fatalf("written %v, want both", g.tids())
	}
	for _, w := range g.out {
		if !strings.Contains(w.line, want[w.tid]) || !strings.Contains(w.line, port[w.tid]) {
			t.Errorf("tid %d: %s; want %s and %s", w.tid, w.line, want[w.tid], port[w.tid])
		}
	}
}
