package explain

import (
	"github.com/eaddr/eaddr/decode"
)

// One printed line can stand for several failed syscalls: Go's dialer
// retries twice on EADDRNOTAVAIL, some clients bind a few times before
// giving up, Ruby's TCPServer tries 0.0.0.0 and then ::. Attempts numbers
// the failures of one logical attempt so that an operator does not count
// three failures where a program printed one line.

// RetryWindowNs is how close (kernel time) a failure must follow the
// previous one of the same attempt by default; a client's catalog entry
// may allow more (retry_window_ms) when it sleeps between tries.
const RetryWindowNs = 50e6

// RetryRule is how Attempts.Mark links the tries of one client.
type RetryRule struct {
	WindowNs uint64 // the longest gap (kernel time) between two tries
	Max      int    // tries per printed line; 0: not bounded
	// AnyThread: the tries may come from any thread of the process. Go
	// runs a goroutine on whichever thread its scheduler gives it: the
	// dialer's retry can follow its first try on another thread (seen on
	// a loaded machine, where the scheduler hands a thread that was
	// preempted in a syscall over to another one).
	AnyThread bool
}

// attemptSlots bounds the (thread, failure) pairs followed; a collision
// forgets an attempt, so a retry may then be numbered 1: never a wrong
// higher number.
const attemptSlots = 1024

// failureID is what the tries of one attempt have in common, besides the
// thread or process.
type failureID struct {
	start   uint64 // the process's start, with the tid or pid: which one for certain
	sys     decode.Syscall
	errno   int
	port    uint16
	anyAddr bool // the address was unspecified (0.0.0.0, ::)
	ip      [16]byte
}

// same: the same failure; for a bind to an unspecified address, either
// family's.
func (f *failureID) same(o *failureID) bool {
	return f.start == o.start && f.sys == o.sys && f.errno == o.errno && f.port == o.port &&
		(f.ip == o.ip || (f.anyAddr && o.anyAddr))
}

type attemptSlot struct {
	id     failureID
	tid    uint32
	fd     int32
	lastNs uint64
	n      int
}

// procSlot is the last try of a process toward one failure, on whichever
// thread, for the clients whose tries move between threads.
type procSlot struct {
	id     failureID
	pid    uint32
	tid    uint32 // the thread of the last try
	fd     int32
	lastNs uint64
	n      int
	// rivalNs: when another thread of the process started an attempt of
	// its own toward the failure while one was open: for a window after
	// it, which attempt a try on a third thread continues is a guess, and
	// it is numbered 1.
	rivalNs uint64
}

// Attempts numbers retries. Not safe for concurrent use; it never
// allocates and never waits.
type Attempts struct {
	slots [attemptSlots]attemptSlot
	procs [attemptSlots]procSlot
}

// Mark returns the attempt number of ev (1 for a first failure): ev
// follows, within rule.WindowNs, a failure of the same thread with the
// same syscall and errno, toward the same port and address (for a bind to
// an unspecified address, either family's), on the same fd or one of the
// next two (a retry closes the socket and opens another). rule.Max > 0 is
// how many tries the client makes per printed line: a failure past it
// starts a new attempt. With rule.AnyThread, a failure on another thread
// of the process continues the attempt when it is on the same fd and no
// other thread's attempt toward the failure is open: otherwise which one
// it continues would be a guess.
func (a *Attempts) Mark(ev *decode.Event, rule RetryRule) int {
	id := failureOf(ev)
	key := id.ip
	if id.anyAddr {
		key = [16]byte{}
	}
	// One slot per thread and failure: events are written in kernel order
	// per failure (address), but another failure of the same thread (an
	// nscd probe waiting for its diagnosis) may come out between two
	// retries and must not break them.
	s := &a.slots[slotIndex(ev.TID, &id, &key)]
	p := &a.procs[slotIndex(ev.PID, &id, &key)]
	within := func(lastNs uint64, fd int32, n int) bool {
		return ev.FD >= fd-2 && ev.FD <= fd+2 && ev.BootNs >= lastNs && ev.BootNs-lastNs <= rule.WindowNs &&
			(rule.Max <= 0 || n < rule.Max)
	}
	pSame := p.n > 0 && p.pid == ev.PID && p.id.same(&id)
	pOpen := pSame && within(p.lastNs, p.fd, p.n)
	var n int
	moved := false
	switch {
	case s.n > 0 && s.tid == ev.TID && s.id.same(&id) && within(s.lastNs, s.fd, s.n):
		n = s.n + 1
	case rule.AnyThread && pOpen && p.tid != ev.TID && ev.FD == p.fd && (p.rivalNs == 0 || (ev.BootNs >= p.rivalNs && ev.BootNs-p.rivalNs > rule.WindowNs)):
		n, moved = p.n+1, true
		// The thread it came from forgets it: a later try that comes back
		// there continues it through this process slot, not from there.
		if old := &a.slots[slotIndex(p.tid, &id, &key)]; old.tid == p.tid && old.lastNs == p.lastNs && old.id.same(&id) {
			old.n = 0
		}
	default:
		n = 1
	}
	rival := uint64(0)
	if pSame {
		rival = p.rivalNs
	}
	if pOpen && p.tid != ev.TID && !moved {
		rival = ev.BootNs // two threads' attempts toward it are open at once
	}
	*p = procSlot{id: id, pid: ev.PID, tid: ev.TID, fd: ev.FD, lastNs: ev.BootNs, n: n, rivalNs: rival}
	*s = attemptSlot{id: id, tid: ev.TID, fd: ev.FD, lastNs: ev.BootNs, n: n}
	return n
}

// failureOf is ev's failure: a bind's local address, a connect's remote
// one; a unix path or name by its hash.
func failureOf(ev *decode.Event) failureID {
	addr := &ev.Remote
	if ev.Syscall == decode.Bind {
		addr = &ev.Local
	}
	id := failureID{start: ev.StartBoottime, sys: ev.Syscall, errno: ev.Errno, anyAddr: true}
	if addr.Valid && addr.IP.IsValid() {
		id.ip = addr.IP.Addr().As16()
		id.anyAddr = addr.IP.Addr().IsUnspecified()
		id.port = addr.IP.Port()
	}
	if len(addr.Path) > 0 { // unix: the same path or name
		h := uint64(14695981039346656037) // FNV-1a
		for _, c := range addr.Path {
			h = (h ^ uint64(c)) * 1099511628211
		}
		for i := 0; i < 8; i++ {
			id.ip[i] = byte(h >> (8 * i))
		}
		id.anyAddr = false
	}
	return id
}

// slotIndex hashes a thread or process id with the failure.
func slotIndex(who uint32, id *failureID, key *[16]byte) uint64 {
	h := uint64(who)*0x9E3779B97F4A7C15 ^ uint64(id.sys)<<48 ^ uint64(id.errno)<<32 ^ uint64(id.port)
	for i := 0; i < 16; i += 8 {
		h = (h ^ uint64(key[i])<<56 ^ uint64(key[i+1])<<48 ^ uint64(key[i+2])<<40 ^ uint64(key[i+3])<<32 ^
			uint64(key[i+4])<<24 ^ uint64(key[i+5])<<16 ^ uint64(key[i+6])<<8 ^ uint64(key[i+7])) * 0x100000001B3
	}
	return h % attemptSlots
}
