// Package sockscene reproduces, with real sockets in a throwaway network
// namespace, every way a connect() or bind() runs out of local ports (or
// cannot use the address it asks for), so that the diagnosis can be tested
// against what the kernel really did.
//
// Each scene makes the failing syscall happen from the test process (the
// victim) inside its own netns, with the sockets that hold the ports handed
// to other processes (`sleep 3600` children that got them through
// exec.Cmd.ExtraFiles): the holder is never the victim. What the kernel
// returned is observed, not assumed (Scene.Errno), and right after the
// failure `ss` and the sysctls are read inside the netns (Scene.Truth).
//
// Build registers its cleanup with t.Cleanup: holders are killed, the
// netns's remaining sockets are waited for until only TIME_WAIT (which the
// kernel purges with the netns) is left, then the netns is closed. After
// Build the scene's netns is left as it was at the failure: checks that
// would change it (a connect that succeeds after the TIME_WAIT reuse delay)
// run on a twin netns built the same way.
//
// A diagnosis test uses it like this:
//
//	s := sockscene.Build(t, "close-wait-leak")
//	// the event: s.Sys, s.Proto, s.Errno, s.Local, s.Remote, s.VictimPID, s.NS
//	// the answer: s.Holders (Role "clients" holds the ports), s.Truth
package sockscene

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// Scene is one reproduced failure.
type Scene struct {
	Name  string
	NS    *netns.NS
	Sys   string        // "connect" or "bind": the syscall that failed
	Proto string        // "tcp" or "udp"
	Errno syscall.Errno // what the kernel returned to the failing call
	// Local is what the failing socket was bound to (for bind: the address
	// it asked for), zero if it was not bound; Remote is the destination of
	// a failing connect, zero for bind.
	Local, Remote netip.AddrPort
	VictimPID     int      // the process that made the failing call (the test)
	Holders       []Holder // the processes that hold the scene's sockets
	Truth         Truth

	// OtherDest and OtherDestOK ("established"): a connect to another
	// destination, made right after the failure, and whether it succeeded.
	OtherDest   netip.AddrPort
	OtherDestOK bool
	// Fix, when not empty, is a fix the scene applied after the failure
	// (without changing the scene's netns for good), and FixWorks whether
	// the failing call then succeeded; FixErrno is what it got otherwise.
	Fix      string
	FixWorks bool
	FixErrno syscall.Errno
	// Twin ("bind-in-use-timewait", "time-wait"), when not empty, is a
	// variant or a fix tried on a twin netns, TwinOK whether the call then
	// succeeded and TwinErrno what it got otherwise; ControlErrno
	// ("time-wait") is what the same call got without the fix just before.
	Twin         string
	TwinOK       bool
	TwinErrno    syscall.Errno
	ControlErrno syscall.Errno
	// Retry ("time-wait-loopback"), when not empty, says what was retried
	// later, on a twin netns; RetryOK whether it succeeded and RetryWaited
	// how long after the TIME_WAITs were made (recorded, not a bound).
	Retry       string
	RetryOK     bool
	RetryWaited string
	// AddrFlags ("address-*"): the `ip -o addr` line of the address asked
	// for, read right after the failure; empty when it is not configured.
	AddrFlags string
	// Attempts is how many times the scene had to be built before its
	// precondition held (see "time-wait-loopback"); 1 for most.
	Attempts int
	// Notes are other observations, in words.
	Notes []string
}

// Holder is a process holding some of the scene's sockets.
type Holder struct {
	PID  int
	Comm string // /proc/PID/comm
	// Role says what the sockets are for the scene: "clients" hold the local
	// ports in the way, "listener" a listener whose port is in the way,
	// "server" the server sides (listeners, accepted sockets) of the
	// destination, "peer" the server sides that keep the clients' orphans
	// alive.
	Role    string
	Sockets int      // how many sockets it holds
	Inodes  []uint64 // their inodes (socket:[INODE] under /proc/PID/fd)
	// Locals are the sockets' local addresses (getsockname when handed
	// over), in the order of Inodes: ss 6.1 does not list sockets that are
	// bound and not connected, these do.
	Locals []netip.AddrPort
	// StartTime is field 22 of /proc/PID/stat, to tell this process from a
	// later one with the same pid.
	StartTime string
}

// Names are the scenes Build knows, in a stable order.
var Names = []string{
	"established",
	"bind-before-connect",
	"bound-only",
	"listener-in-range",
	"close-wait-leak",
	"fin-wait2-orphans",
	"time-wait",
	"time-wait-loopback",
	"four-tuple",
	"address-gone",
	"address-tentative",
	"bind-port0",
	"bind-in-use-listener",
	"bind-in-use-timewait",
	"udp-exhausted",
	"udp-bind-port0",
	"reserved",
}

// builders make each scene on a fresh rig.
var builders = map[string]func(*rig, *Scene){
	"established":          buildEstablished,
	"bind-before-connect":  buildBindBeforeConnect,
	"bound-only":           buildBoundOnly,
	"listener-in-range":    buildListenerInRange,
	"close-wait-leak":      buildCloseWait,
	"fin-wait2-orphans":    buildFinWait2,
	"time-wait":            buildTimeWait,
	"time-wait-loopback":   buildTimeWaitLoopback,
	"four-tuple":           buildFourTuple,
	"address-gone":         buildAddressGone,
	"address-tentative":    buildAddressTentative,
	"bind-port0":           buildBindPort0,
	"bind-in-use-listener": buildBindInUseListener,
	"bind-in-use-timewait": buildBindInUseTimeWait,
	"udp-exhausted":        buildUDPExhausted,
	"udp-bind-port0":       buildUDPBindPort0,
	"reserved":             buildReserved,
}

// Build makes the scene called name (one of Names) in a new netns and
// returns it once the failing call has been made and the truth read. It
// fails t if the scene cannot be made, or if the call that should fail
// succeeded; which errno it failed with is for the caller to check.
// Cleanup is registered with t.Cleanup and runs even when Build fails.
func Build(t testing.TB, name string) *Scene {
	t.Helper()
	build, ok := builders[name]
	if !ok {
		t.Fatalf("sockscene: no scene %q (know %v)", name, Names)
	}
	if name == "time-wait-loopback" {
		return buildWithinDelay(t, name, build)
	}
	r := newRig(t, name)
	s := &Scene{Name: name, NS: r.ns, Attempts: 1}
	build(r, s)
	return s
}
