package explain

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// binLimits bound the work of analysing one binary. The file belongs to a
// container eaddr does not trust, and every size and count in an ELF file is
// the file's own claim: a binary past any of these is not analysed (an error
// wrapping errGaveUp), and the event says so, rather than eaddr reading,
// allocating or looping as much as the file asks. Real programs stay far
// below each: a few dozen headers and sections, a .shstrtab under a KiB, a
// .dynamic of about 60 entries, library names under 100 bytes, a Go build
// info of a few KiB.
type binLimits struct {
	ProgHeaders  int   // e_phnum
	Sections     int   // section headers (e_shnum, or section 0's sh_size)
	HeaderTable  int64 // bytes of either header table: entries × e_phentsize or e_shentsize
	SectionNames int64 // bytes of the section name string table
	DynEntries   int   // entries of the SHT_DYNAMIC section
	NeededLen    int   // bytes of one DT_NEEDED name
	GoSearch     int64 // bytes of the data searched for Go's build info
	GoVersion    int   // bytes of the Go version string
	GoModInfo    int   // bytes of the Go module info (path, deps, build settings)
	Scan         int64 // bytes of read-only data searched for libc's wording (stops quietly)
	// Read caps every byte read from the file, whatever for; Time the
	// wall-clock time from the first read to the last (a file system that
	// answers slowly: FUSE, NFS). Both are checked before each read.
	Read int64
	Time time.Duration
}

// defaultBinLimits are the bounds eaddr applies (docs/performance.md).
var defaultBinLimits = binLimits{
	ProgHeaders:  1024,
	Sections:     4096,
	HeaderTable:  512 << 10,
	SectionNames: 256 << 10,
	DynEntries:   4096,
	NeededLen:    1024,
	GoSearch:     16 << 20,
	GoVersion:    1024,
	GoModInfo:    1 << 20,
	Scan:         maxScanBytes,
	Read:         maxBinaryRead,
	Time:         time.Second,
}

// maxBinaryRead is the most eaddr reads of one binary: the data search
// (maxScanBytes) and the Go build info search dominate; the headers, names
// and build info strings are small beside them.
const maxBinaryRead = maxScanBytes + 16<<20 + 4<<20

// errGaveUp is wrapped by the error for a binary past one of binLimits.
var errGaveUp = errors.New("not analysed: past eaddr's bounds on one binary")

// limitError says which bound a binary exceeded. retry is true when
// another try may not (the time budget: a slow disk).
type limitError struct {
	why   string
	retry bool
}

func (e *limitError) Error() string        { return e.why }
func (e *limitError) Is(target error) bool { return target == errGaveUp }

func gaveUp(format string, args ...any) error {
	return &limitError{why: fmt.Sprintf(format, args...)}
}

// binReader reads one binary within lim: no read goes past the size the
// file had when it was opened (a file that grows meanwhile is read as it
// was), past lim.Read bytes in all, or past lim.Time.
type binReader struct {
	r     io.ReaderAt
	size  int64 // the file's size when opened
	lim   *binLimits
	now   func() time.Time
	start time.Time
	read  int64 // bytes read so far
	reads int   // ReadAt calls that reached the file
}

func newBinReader(r io.ReaderAt, size int64, lim *binLimits, now func() time.Time) *binReader {
	return &binReader{r: r, size: size, lim: lim, now: now, start: now()}
}

// ReadAt is io.ReaderAt's, with a *limitError past the bounds.
func (b *binReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= b.size {
		return 0, io.EOF
	}
	short := int64(len(p)) > b.size-off
	if short {
		p = p[:b.size-off]
	}
	if b.read+int64(len(p)) > b.lim.Read {
		return 0, gaveUp("reading it needs more than the %d bytes eaddr reads of one binary", b.lim.Read)
	}
	if d := b.now().Sub(b.start); d > b.lim.Time {
		return 0, &limitError{why: fmt.Sprintf("reading it took longer than %v", b.lim.Time), retry: true}
	}
	n, err := b.r.ReadAt(p, off)
	b.read += int64(n)
	b.reads++
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// readFull reads len(p) bytes at off: fewer is io.ErrUnexpectedEOF (io.EOF
// when none were read), unless a bound tripped.
func (b *binReader) readFull(p []byte, off int64) error {
	n, err := b.ReadAt(p, off)
	switch {
	case n == len(p):
		return nil
	case errors.Is(err, errGaveUp):
		return err
	case err != nil && err != io.EOF:
		return err
	case n == 0:
		return io.EOF
	}
	return io.ErrUnexpectedEOF
}
