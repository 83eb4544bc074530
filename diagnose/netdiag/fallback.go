package netdiag

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// TestingNoSockDiag, set by tests only, makes every sock_diag dump fail with
// ENOENT, as on a kernel whose inet_diag and unix_diag modules are missing,
// so that the /proc/net fallback runs.
var TestingNoSockDiag atomic.Bool

// testingEnv, set to 1 in the environment of the eaddr binary by its tests
// (cmd/eaddr), sets TestingNoSockDiag at start.
const testingEnv = "EADDR_TESTING_NO_SOCK_DIAG"

func init() {
	if os.Getenv(testingEnv) == "1" {
		TestingNoSockDiag.Store(true)
	}
}

var logger atomic.Pointer[slog.Logger]

// SetLogger sets where netdiag says, once per process and kind (inet, unix),
// that sock_diag cannot dump a family and /proc/net is read instead. The
// default is slog.Default().
func SetLogger(l *slog.Logger) { logger.Store(l) }

func logf() *slog.Logger {
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// A family the kernel could not dump is read from /proc/net for retryAfter
// before sock_diag is asked again: each failing request makes the kernel try
// to load the module (request_module, a usermode modprobe).
const retryAfter = time.Minute

// Kinds of dump, for the memory of failures.
const (
	kindTCP4 = iota
	kindTCP6
	kindUDP4
	kindUDP6
	kindUnix
	nKinds
)

var (
	failedAt   [nKinds]atomic.Int64 // unix nanoseconds of the last "cannot dump"; 0: never
	warnedInet sync.Once
	warnedUnix sync.Once
)

func inetKind(family, proto uint8) int {
	k := kindTCP4
	if proto == unix.IPPROTO_UDP {
		k = kindUDP4
	}
	if family == unix.AF_INET6 {
		k++
	}
	return k
}

// noHandler reports whether err means the kernel has no sock_diag handler
// for the request: ENOENT (inet_diag, tcp_diag, udp_diag, unix_diag not
// loaded), EPROTONOSUPPORT (no sock_diag at all) or EOPNOTSUPP.
func noHandler(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP)
}

// useNetlink reports whether sock_diag is worth asking for kind.
func useNetlink(d *sockDiag, kind int) bool {
	if d == nil || TestingNoSockDiag.Load() {
		return false
	}
	at := failedAt[kind].Load()
	return at == 0 || time.Since(time.Unix(0, at)) >= retryAfter
}

// cannotDump remembers that sock_diag failed for kind with err and says so
// once per process. A failure forced by TestingNoSockDiag is not
// remembered, so the next dump after the test clears it uses sock_diag.
func cannotDump(kind int, what string, err error) {
	if !TestingNoSockDiag.Load() {
		failedAt[kind].Store(time.Now().UnixNano())
	}
	if kind == kindUnix {
		warnedUnix.Do(func() {
			logf().Warn("sock_diag cannot dump unix sockets in this kernel: unix_diag is not loaded; eaddr reads /proc/net/unix of the netns instead (listeners by bound name, no file inode)",
				"err", err, "fix", "modprobe unix_diag")
		})
		return
	}
	warnedInet.Do(func() {
		logf().Warn("sock_diag cannot dump "+what+" sockets in this kernel: inet_diag, tcp_diag or udp_diag is not loaded; eaddr reads /proc/net/{tcp,tcp6,udp,udp6} of the netns instead (same counts, slower on many sockets)",
			"err", err, "fix", "modprobe inet_diag tcp_diag udp_diag")
	})
}

// eachInet calls each for the sockets of one family and protocol: by
// sock_diag, or from /proc/net when the kernel cannot dump them (d is nil
// when it has no sock_diag at all). It runs on a thread inside the netns.
// A dump that fails after it handed sockets on is not done again from
// /proc/net: that would hand them on twice.
func eachInet(d *sockDiag, family, proto uint8, each func(*Socket)) error {
	kind := inetKind(family, proto)
	if useNetlink(d, kind) {
		n := 0
		err := d.eachInetNetlink(family, proto, func(s *Socket) { n++; each(s) })
		if err == nil || n > 0 || !noHandler(err) {
			return err
		}
		cannotDump(kind, famName(family)+" "+protoName(proto), err)
	} else if TestingNoSockDiag.Load() {
		cannotDump(kind, famName(family)+" "+protoName(proto), unix.ENOENT)
	} else if d == nil {
		cannotDump(kind, famName(family)+" "+protoName(proto), unix.EPROTONOSUPPORT)
	}
	name := procNetFile(family, proto)
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("sock_diag cannot dump it and %w", err)
	}
	defer f.Close()
	if err := eachProcNetInet(f, family, proto, each); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
