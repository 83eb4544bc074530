package explain

import (
	"strings"
	"syscall"
)

//go:generate go run ./internal/strerrorgen
//go:generate go run ./internal/strerrorl10n
//go:generate go run ./internal/wordingsdoc

// Libc names a C library (or Go's own table) whose strerror wording a process
// uses.
type Libc string

const (
	libcGlibc   Libc = "glibc"
	libcMusl    Libc = "musl"
	libcGo      Libc = "go" // Go's syscall.Errno.Error(): glibc's words, lower case
	LibcUnknown Libc = ""
)

// strerrorMax is the highest errno the tables cover (EHWPOISON on
// linux/amd64 and linux/arm64).
const strerrorMax = 133

// goStrerror is Go's own wording, taken at run time from the syscall package
// of the Go that built this binary (a traced Go program built with another Go
// release may word a few errnos differently). Numbers Go has no text for
// ("errno N") are left empty.
var goStrerror = func() (t [strerrorMax + 1]string) {
	for i := 1; i <= strerrorMax; i++ {
		if s := syscall.Errno(i).Error(); !strings.HasPrefix(s, "errno ") {
			t[i] = s
		}
	}
	return t
}()

// strerror returns the text libc prints for errno n (as strerror(3) and
// perror(3) would), and false when that libc has no text for n or libc is
// unknown. It does not allocate.
//
// The glibc and musl tables are generated (strerror_glibc.go,
// strerror_musl.go) from the C libraries themselves; errnos for which the C
// library only has a placeholder ("Unknown error N", "No error information")
// report false.
func strerror(libc Libc, n int) (string, bool) {
	var s string
	switch libc {
	case libcGlibc:
		if n > 0 && n < len(glibcStrerror) {
			s = glibcStrerror[n]
		}
	case libcMusl:
		if n > 0 && n < len(muslStrerror) {
			s = muslStrerror[n]
		}
	case libcGo:
		if n > 0 && n < len(goStrerror) {
			s = goStrerror[n]
		}
	}
	return s, s != ""
}

// translation is glibc's translation of an errno's strerror text into the
// languages Langs ("de", "pt, pt_BR"), from strerror_l10n.go.
type translation struct {
	Errno int
	Text  string
	Langs string
}
