package explain

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Runtime values of BinaryInfo.Runtime.
const (
	runtimeC       = "c"       // a native program that prints libc's strerror text
	runtimeGo      = "go"      // a Go program (syscall.Errno.Error, Go's own table)
	runtimeBusyBox = "busybox" // BusyBox (libc's strerror, BusyBox's own message framing)
	runtimePython  = "python"
	runtimeJava    = "java"
	runtimeNode    = "node"
	runtimePerl    = "perl"
	runtimeRuby    = "ruby"
	runtimePHP     = "php"
	runtimeUnknown = ""
)

// BinaryInfo is how a program renders errnos: its language runtime and the C
// library whose strerror it uses. It is derived from the program's ELF file,
// never from its comm.
type BinaryInfo struct {
	// Runtime is "c" (a native program using libc's strerror), "go",
	// "busybox", "python", "java", "node", "perl", "ruby", "php", or ""
	// (unknown).
	Runtime string
	// Libc is the errno wording the program prints: libcGlibc, libcMusl,
	// libcGo (Go's own table), or LibcUnknown.
	Libc Libc
	// Static is true when the ELF file has no PT_INTERP (statically linked,
	// including static-pie).
	Static bool
	// Interp is the PT_INTERP path, e.g. /lib64/ld-linux-x86-64.so.2 or
	// /lib/ld-musl-x86_64.so.1; empty when Static.
	Interp string
	// GoVersion is the toolchain version from debug/buildinfo (e.g.
	// "go1.26.8") when Runtime == "go".
	GoVersion string
	// Name is the base name of the file analysed, after symlink resolution,
	// e.g. "busybox", "python3.11", "curl".
	Name string
	// Needed are the shared libraries the program links (DT_NEEDED, at
	// most maxNeeded), e.g. "libcurl-gnutls.so.4": a program that links
	// libcurl words a failed connect() as libcurl does.
	Needed []string
	// GoPath is a Go program's main package path from its build info,
	// e.g. "github.com/prometheus/prometheus/cmd/prometheus".
	GoPath string
}

// maxNeeded bounds BinaryInfo.Needed.
const maxNeeded = 64

// errNotELF is returned (wrapped) by analyzeBinaryFile when the file is not
// an ELF executable, e.g. a "#!" script.
var errNotELF = errors.New("not an ELF file")

// Strings searched for in a binary's read-only data. They are matched
// case-sensitively, so Go's lower-case table ("cannot assign requested
// address") never matches the glibc needle.
var (
	// glibcEADDRNOTAVAIL is glibc's strerror(EADDRNOTAVAIL).
	glibcEADDRNOTAVAIL = []byte("Cannot assign requested address")
	// muslEADDRNOTAVAIL is musl's strerror(EADDRNOTAVAIL).
	muslEADDRNOTAVAIL = []byte("Address not available")
	// busyBoxMarker starts BusyBox's banner, "BusyBox v1.35.0 (...)".
	busyBoxMarker = []byte("BusyBox v")
)

const (
	// scanChunk is the read size used while searching a binary's data, so
	// memory stays bounded whatever the size of the file.
	scanChunk = 256 << 10
	// maxScanBytes caps how much of one file is searched.
	maxScanBytes = 64 << 20
	// maxInterpLen bounds the PT_INTERP string read (PATH_MAX).
	maxInterpLen = 4096
)

// analyzeBinaryFile classifies the open ELF file f (for instance an fd the
// caller holds on /proc/PID/exe). name is the base name to use for
// BinaryInfo.Name and the interpreter-by-name rule (a directory part or a
// " (deleted)" suffix, as readlink of /proc/PID/exe shows, is dropped); when
// empty it is taken from the path f refers to. f is only read with ReadAt: its
// offset is untouched and it is not closed.
//
// The file is the container's, not eaddr's: every size and count in it is
// its own claim. The headers are read by elfFile (what debug/elf accepts,
// without its unbounded copies and its panics) and the Go build info by
// goBuildInfo (debug/buildinfo's rules), both within binLimits: a file past
// one of them is not analysed, with an error wrapping errGaveUp that says
// which, and no part of what was read is returned. The analysis of one
// file reads at most maxBinaryRead bytes and takes at most a second.
//
// The rules, in order:
//
//  1. Not an ELF file (e.g. a shell script): an error wrapping errNotELF.
//  2. Go: if the Go build info is found (as debug/buildinfo.Read finds it),
//     Runtime "go" and Libc "go" even with cgo, because Go formats syscall
//     errors (net.Dial, ...) with syscall.Errno.Error and its own errno
//     table, never libc's strerror. GoVersion is set from the build info.
//     It is not looked for in a file that has section headers but none of
//     Go's (see mayBeGo): that would scan the data segment of every C
//     program in vain.
//  3. Libc of a dynamic ELF (has PT_INTERP) comes from the interpreter path:
//     "ld-musl" means musl; "ld-linux" (ld-linux-x86-64.so.2,
//     ld-linux-aarch64.so.1, ...) or "ld64.so" means glibc; anything else
//     is unknown. The strerror text lives in the shared libc, not in the
//     program, so its data is not consulted.
//  4. Libc of a static ELF (no PT_INTERP): the program carries its libc's
//     message table, so the read-only data (.rodata sections, or the whole
//     file when there are none) is searched for the text strerror(
//     EADDRNOTAVAIL) prints: "Cannot assign requested address" means glibc,
//     "Address not available" means musl. Neither (the program never calls
//     strerror) or both (ambiguous) leaves Libc unknown. The search streams
//     the data in chunks and stops quietly after maxScanBytes.
//  5. BusyBox: the read-only data contains "BusyBox v" (its banner) or the
//     name is "busybox" → Runtime "busybox" (Debian's busybox-static is static
//     glibc, Alpine's busybox is dynamic musl).
//  6. Interpreters by name: python, python3, python3.N → "python"; java →
//     "java"; node, nodejs → "node"; perl, perl5.N → "perl"; ruby, ruby3.N →
//     "ruby"; php, php8.N → "php". Libc still comes from rules 3 and 4.
//  7. Otherwise a native program: Runtime "c", with the libc found.
func analyzeBinaryFile(f *os.File, name string) (BinaryInfo, error) {
	if name == "" {
		name = openedName(f, f.Name())
	} else {
		name = binaryBaseName(name)
	}
	fi, err := f.Stat()
	if err != nil {
		return BinaryInfo{Name: name}, fmt.Errorf("analyze %s: %w", name, err)
	}
	return analyzeBinary(newBinReader(f, fi.Size(), &defaultBinLimits, time.Now), name)
}

// analyzeBinary applies analyzeBinaryFile's rules to the file r reads,
// within r's limits: past one, the error wraps errGaveUp and nothing of the
// file is claimed.
func analyzeBinary(r *binReader, name string) (BinaryInfo, error) {
	info := BinaryInfo{Name: name}
	ef, err := openELF(r, name)
	if err != nil {
		return info, err
	}
	if info.Interp, info.Static, err = ef.interp(); err != nil {
		return info, fmt.Errorf("analyze %s: reading PT_INTERP: %w", name, err)
	}

	// Rule 2: Go.
	if mayBeGo(ef) {
		vers, path, ok, err := ef.goBuildInfo()
		if err != nil {
			return info, fmt.Errorf("analyze %s: %w", name, err)
		}
		if ok {
			info.Runtime = runtimeGo
			info.Libc = libcGo
			info.GoVersion, info.GoPath = vers, path
			return info, nil
		}
		// Any other failure, including an I/O error, means "not
		// (readable as) Go"; the rules below still give a useful answer.
	}

	// Rules 3 to 5: one pass over the read-only data finds the BusyBox
	// banner and, for a static program, its libc's wording.
	needles := [][]byte{busyBoxMarker}
	if info.Static {
		needles = append(needles, glibcEADDRNOTAVAIL, muslEADDRNOTAVAIL)
	}
	needed, err := ef.needed()
	switch {
	case errors.Is(err, errGaveUp):
		return info, fmt.Errorf("analyze %s: %w", name, err)
	case err == nil:
		info.Needed = needed
	}
	found, err := scanReadOnly(ef, needles)
	if err != nil {
		return info, fmt.Errorf("analyze %s: %w", name, err)
	}
	classify(&info, found)
	return info, nil
}

// classify sets the libc and runtime from what the scan found: BusyBox's
// banner, glibc's and musl's wording of EADDRNOTAVAIL (rules 3 to 7).
func classify(info *BinaryInfo, found []bool) {
	if info.Static {
		glibc, musl := found[1], found[2]
		switch {
		case glibc && !musl:
			info.Libc = libcGlibc
		case musl && !glibc:
			info.Libc = libcMusl
		}
	} else {
		info.Libc = libcFromInterp(info.Interp)
	}
	switch {
	case found[0] || info.Name == "busybox":
		info.Runtime = runtimeBusyBox
	default:
		info.Runtime = interpreterByName(info.Name) // rule 6
		if info.Runtime == runtimeUnknown {
			info.Runtime = runtimeC // rule 7
		}
	}
}

// openELF checks the magic itself (rule 1), so a script gets a clear error
// rather than "bad magic number", then reads the ELF headers.
func openELF(r *binReader, name string) (*elfFile, error) {
	var magic [4]byte
	if n, err := r.ReadAt(magic[:], 0); n < len(magic) {
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("analyze %s: %w", name, err)
		}
		return nil, fmt.Errorf("analyze %s: %w (file too short)", name, errNotELF)
	}
	if string(magic[:]) != elf.ELFMAG {
		if magic[0] == '#' && magic[1] == '!' {
			return nil, fmt.Errorf("analyze %s: %w (a #! script)", name, errNotELF)
		}
		return nil, fmt.Errorf("analyze %s: %w", name, errNotELF)
	}
	ef, err := parseELF(r)
	if err != nil {
		return nil, fmt.Errorf("analyze %s: %w", name, err)
	}
	return ef, nil
}

// libcFromInterp maps a PT_INTERP path to a libc (rule 3).
func libcFromInterp(interp string) Libc {
	base := filepath.Base(interp)
	switch {
	case strings.Contains(base, "ld-musl"):
		return libcMusl
	case strings.Contains(base, "ld-linux"), strings.Contains(base, "ld64.so"):
		return libcGlibc
	}
	return LibcUnknown
}

// interpreterByName applies rule 6 to a base name, returning "" when the name
// is not one of the known interpreters.
func interpreterByName(name string) string {
	switch name {
	case "java":
		return runtimeJava
	case "node", "nodejs":
		return runtimeNode
	}
	for _, p := range [...]struct{ prefix, runtime string }{
		{"python", runtimePython},
		{"perl", runtimePerl},
		{"ruby", runtimeRuby},
		{"php", runtimePHP},
	} {
		v, ok := strings.CutPrefix(name, p.prefix)
		if !ok {
			continue
		}
		if p.runtime == runtimePython {
			// ABI flags: python3.13t (free-threaded), python3.11d (debug).
			v = strings.TrimRight(v, "dmt")
		}
		if isVersionSuffix(v) {
			return p.runtime
		}
	}
	return runtimeUnknown
}

// isVersionSuffix reports whether s is empty or a dotted version such as "3",
// "3.11" or "5.36.0".
func isVersionSuffix(s string) bool {
	if s == "" {
		return true
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
	}
	return true
}

// mayBeGo reports whether the Go build info is worth looking for. The Go
// linker always emits a .go.buildinfo section; without it the search would
// scan the whole first writable segment of every C program in vain. A file
// with no section headers at all (stripped with sstrip) may still be Go.
func mayBeGo(ef *elfFile) bool {
	if len(ef.sections) == 0 {
		return true
	}
	for i := range ef.sections {
		s := &ef.sections[i]
		if ef.nameIs(s, ".go.buildinfo") || ef.nameIs(s, ".note.go.buildid") || ef.nameIs(s, ".gopclntab") {
			return true
		}
	}
	return false
}

// fileSpan is a byte range of the file.
type fileSpan struct{ off, size int64 }

// scanReadOnly searches the file's read-only data for each needle and reports
// which were found. The data is the sections named .rodata or .rodata.*; when
// the file has none (no section headers) the whole file is searched. At most
// lim.Scan bytes are read, in scanChunk pieces overlapping by the longest
// needle's length - 1 so a match across a chunk boundary is not missed.
func scanReadOnly(ef *elfFile, needles [][]byte) ([]bool, error) {
	var spans []fileSpan
	for i := range ef.sections {
		s := &ef.sections[i]
		if s.typ == elf.SHT_NOBITS || (!ef.nameIs(s, ".rodata") && !ef.nameHasPrefix(s, ".rodata.")) {
			continue
		}
		if s.compressedOrZlib {
			return nil, gaveUp("its read-only data is compressed, and eaddr does not inflate sections")
		}
		spans = append(spans, fileSpan{int64(s.off), int64(s.size)})
	}
	if len(spans) == 0 {
		spans = append(spans, fileSpan{0, ef.r.size})
	}
	return scanSpans(ef.r, spans, needles, ef.r.lim.Scan)
}

// scanSpans is the chunked search behind scanReadOnly. A short read (EOF)
// ends a span early. It stops as soon as every needle is found or budget
// bytes have been read.
func scanSpans(r io.ReaderAt, spans []fileSpan, needles [][]byte, budget int64) ([]bool, error) {
	found := make([]bool, len(needles))
	overlap := 0
	for _, n := range needles {
		overlap = max(overlap, len(n)-1)
	}
	missing := len(needles)
	buf := make([]byte, scanChunk+overlap)
	for _, sp := range spans {
		off, end := sp.off, sp.off+min(sp.size, budget)
		budget -= end - off
		keep := 0 // bytes carried over from the previous chunk of this span
		for off < end && missing > 0 {
			want := int(min(int64(scanChunk), end-off))
			n, err := r.ReadAt(buf[keep:keep+want], off)
			if err != nil && err != io.EOF {
				return found, fmt.Errorf("reading at offset %d: %w", off, err)
			}
			window := buf[:keep+n]
			for i, nd := range needles {
				if !found[i] && bytes.Contains(window, nd) {
					found[i] = true
					missing--
				}
			}
			if n < want {
				break // end of file
			}
			off += int64(n)
			keep = min(len(window), overlap)
			copy(buf, window[len(window)-keep:])
		}
		if missing == 0 || budget <= 0 {
			break
		}
	}
	return found, nil
}

// openedName returns the base name of the file f refers to, after all
// symlinks: readlink of /proc/self/fd/N names the file actually opened (also
// for /proc/PID/exe, or a file in another mount namespace). It falls back to
// the base of path when /proc is unavailable.
func openedName(f *os.File, path string) string {
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil && strings.HasPrefix(target, "/") {
		return binaryBaseName(target)
	}
	return binaryBaseName(path)
}

// binaryBaseName reduces a path (or a readlink of /proc/PID/exe) to a base name,
// dropping the kernel's " (deleted)" suffix for an unlinked file.
func binaryBaseName(name string) string {
	return filepath.Base(strings.TrimSuffix(name, " (deleted)"))
}
