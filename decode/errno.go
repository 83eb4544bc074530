package decode

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The errnos eaddr is about (Linux's values, the same on amd64 and arm64).
const (
	EADDRINUSE    = int(unix.EADDRINUSE)
	EADDRNOTAVAIL = int(unix.EADDRNOTAVAIL)
)

// errnoNames is filled once from golang.org/x/sys/unix so that decoding an
// event never allocates a name.
var errnoNames, errnoByName = func() ([256]string, map[string]int) {
	var names [256]string
	byName := make(map[string]int)
	for i := 1; i < len(names); i++ {
		if n := unix.ErrnoName(syscall.Errno(i)); n != "" {
			names[i] = n
			if _, dup := byName[n]; !dup { // EAGAIN before EWOULDBLOCK, EDEADLK before EDEADLOCK
				byName[n] = i
			}
		}
	}
	// Aliases that Linux defines to the same number as another name.
	byName["EWOULDBLOCK"] = 11
	byName["EDEADLOCK"] = 35
	byName["ENOTSUP"] = 95
	return names, byName
}()

// ErrnoName returns the symbolic name of errno n ("EADDRNOTAVAIL"), or
// "unknown:N" for a number Linux does not define.
func ErrnoName(n int) string {
	if n > 0 && n < len(errnoNames) && errnoNames[n] != "" {
		return errnoNames[n]
	}
	return "unknown:" + strconv.Itoa(n)
}

// AppendErrnoName appends ErrnoName(n) without allocating.
func AppendErrnoName(b []byte, n int) []byte {
	if n > 0 && n < len(errnoNames) && errnoNames[n] != "" {
		return append(b, errnoNames[n]...)
	}
	return strconv.AppendInt(append(b, "unknown:"...), int64(n), 10)
}

// ParseErrno accepts a name (EADDRINUSE, eaddrinuse) or a number (98).
func ParseErrno(s string) (int, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 255 {
			return 0, fmt.Errorf("errno %d is out of range 1..255", n)
		}
		return n, nil
	}
	if n, ok := errnoByName[strings.ToUpper(s)]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("unknown errno %q (use a name such as EADDRNOTAVAIL or a number such as 99)", s)
}
