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

// attemptSlots bounds the (thread, failure) pairs followed; a collision
// forgets an attempt, so a retry may then be numbered 1: never a wrong
// higher number.
const attemptSlots = 1024

type attemptSlot struct {
	tid     uint32
	start   uint64 // the process's start, with the tid: which thread for certain
	sys     decode.Syscall
	errno   int
	port    uint16
	fd      int32
	lastNs  uint64
	n       int
	anyAddr bool // the address was unspecified (0.0.0.0, ::)
	ip      [16]byte
}

// Attempts numbers retries. Not safe for concurrent use; it never
// allocates and never waits.
type Attempts struct {
	slots [attemptSlots]attemptSlot
}

// Mark returns the attempt number of ev (1 for a first failure): ev
// follows, within window ns, a failure of the same thread with the same
// syscall and errno, toward the same port and address (for a bind to an
// unspecified address, either family's), on the same fd or one of the next
// two (a retry closes the socket and opens another). max > 0 is how many
// tries the client makes per printed line: a failure past it starts a new
// attempt.
func (a *Attempts) Mark(ev *decode.Event, window uint64, max int) int {
	addr := &ev.Remote
	if ev.Syscall == decode.Bind {
		addr = &ev.Local
	}
	var ip [16]byte
	any := true
	if addr.Valid && addr.IP.IsValid() {
		ip = addr.IP.Addr().As16()
		any = addr.IP.Addr().IsUnspecified()
	}
	port := uint16(0)
	if addr.Valid && addr.IP.IsValid() {
		port = addr.IP.Port()
	}
	if len(addr.Path) > 0 { // unix: the same path or name
		h := uint64(14695981039346656037) // FNV-1a
		for _, c := range addr.Path {
			h = (h ^ uint64(c)) * 1099511628211
		}
		for i := 0; i < 8; i++ {
			ip[i] = byte(h >> (8 * i))
		}
		any = false
	}
	// One slot per thread and failure: events are written in kernel order
	// per failure (address), but another failure of the same thread (an
	// nscd probe waiting for its diagnosis) may come out between two
	// retries and must not break them.
	key := ip
	if any {
		key = [16]byte{}
	}
	h := uint64(ev.TID)*0x9E3779B97F4A7C15 ^ uint64(ev.Syscall)<<48 ^ uint64(ev.Errno)<<32 ^ uint64(port)
	for i := 0; i < 16; i += 8 {
		h = (h ^ uint64(key[i])<<56 ^ uint64(key[i+1])<<48 ^ uint64(key[i+2])<<40 ^ uint64(key[i+3])<<32 ^
			uint64(key[i+4])<<24 ^ uint64(key[i+5])<<16 ^ uint64(key[i+6])<<8 ^ uint64(key[i+7])) * 0x100000001B3
	}
	s := &a.slots[h%attemptSlots]
	same := s.n > 0 && s.tid == ev.TID && s.start == ev.StartBoottime && s.sys == ev.Syscall &&
		s.errno == ev.Errno && s.port == port && (s.ip == ip || (any && s.anyAddr)) &&
		ev.FD >= s.fd-2 && ev.FD <= s.fd+2 && ev.BootNs >= s.lastNs && ev.BootNs-s.lastNs <= window &&
		(max <= 0 || s.n < max)
	if !same {
		*s = attemptSlot{tid: ev.TID, start: ev.StartBoottime, sys: ev.Syscall, errno: ev.Errno, port: port, anyAddr: any, ip: ip}
	}
	s.n++
	s.fd, s.lastNs = ev.FD, ev.BootNs
	return s.n
}
