package explain

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxBinaryAlloc is the most the analysis of one binary allocates, whatever
// the file claims: its tables (HeaderTable twice), names, .dynamic, the
// DT_NEEDED names, the search and scan buffers, the Go module info and what
// runtime/debug.ParseBuildInfo makes of it. Measured worst cases are near
// 5 MiB.
const maxBinaryAlloc = 16 << 20

// fixedClock never moves: the time budget does not trip.
func fixedClock() time.Time { return time.Time{} }

// analyzeBytes analyses data as a file of that size, with lim (the
// defaults when nil) and a clock that never moves.
func analyzeBytes(data []byte, lim *binLimits) (BinaryInfo, *binReader, error) {
	return analyzeAt(bytes.NewReader(data), int64(len(data)), lim)
}

func analyzeAt(r io.ReaderAt, size int64, lim *binLimits) (BinaryInfo, *binReader, error) {
	if lim == nil {
		l := defaultBinLimits
		lim = &l
	}
	br := newBinReader(r, size, lim, fixedClock)
	info, err := analyzeBinary(br, "prog")
	return info, br, err
}

// allocated returns what fn allocated, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkAnalysis is the fuzz target's check of one file (see
// FuzzAnalyzeBinary).
func checkAnalysis(t *testing.T, data []byte) {
	var info BinaryInfo
	var br *binReader
	var err error
	alloc := allocated(func() { info, br, err = analyzeBytes(data, nil) })
	if br.read > maxBinaryRead || alloc > maxBinaryAlloc {
		t.Fatalf("%d bytes read (bound %d), %d allocated (bound %d)", br.read, maxBinaryRead, alloc, maxBinaryAlloc)
	}
	switch {
	case err == nil:
		checkInfo(t, info)
	case errors.Is(err, errNotELF), errors.Is(err, errGaveUp),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF): // a PT_INTERP past the end
		if errors.Is(err, errGaveUp) {
			return // nothing to compare: the reference is unbounded here
		}
	default:
		t.Fatalf("unexpected error %v", err)
	}
	ef, perr := parseELF(newBinReader(bytes.NewReader(data), int64(len(data)), &defaultBinLimits, fixedClock))
	if perr != nil && !errors.Is(perr, errNotELF) {
		return
	}
	if ef != nil && !refSafe(ef, data) {
		return
	}
	want, panicked, wantErr := refAnalyze(bytes.NewReader(data), int64(len(data)), "prog")
	if d := sameAnalysis(info, err, want, panicked, wantErr); d != "" {
		t.Fatal(d)
	}
}

// checkInfo: what a successful analysis returns is within the bounds.
func checkInfo(t *testing.T, info BinaryInfo) {
	t.Helper()
	switch info.Runtime {
	case runtimeC, runtimeGo, runtimeBusyBox, runtimePython, runtimeJava, runtimeNode, runtimePerl, runtimeRuby, runtimePHP:
	default:
		t.Errorf("runtime %q", info.Runtime)
	}
	if (info.Runtime == runtimeGo) != (info.GoVersion != "") || len(info.GoVersion) > defaultBinLimits.GoVersion {
		t.Errorf("runtime %q, Go version %q", info.Runtime, info.GoVersion)
	}
	if len(info.Needed) > maxNeeded || len(info.Interp) > maxInterpLen || (info.Static && info.Interp != "") {
		t.Errorf("%d libraries, interp %q, static %v", len(info.Needed), info.Interp, info.Static)
	}
	for _, n := range info.Needed {
		if len(n) > defaultBinLimits.NeededLen {
			t.Errorf("a DT_NEEDED name of %d bytes", len(n))
		}
	}
}

// TestAnalyzeBinarySeeds runs the fuzz target's check over its seeds by
// name (go test runs them under FuzzAnalyzeBinary too; this names them).
func TestAnalyzeBinaryHostileSeeds(t *testing.T) {
	for name, data := range binHostileSeeds() {
		t.Run(name, func(t *testing.T) {
			checkAnalysis(t, data)
			_, _, err := analyzeBytes(data, nil)
			t.Logf("%d bytes: %v", len(data), err)
		})
	}
}

// TestAnalyzeBinaryMatchesReference: on real programs, whole and cut at
// every binCuts length, the bounded analysis answers what debug/elf and
// debug/buildinfo did.
func TestAnalyzeBinaryMatchesReference(t *testing.T) {
	for name, data := range binRealSeeds(t, 1<<62) {
		info, _, err := analyzeBytes(data, nil)
		want, panicked, wantErr := refAnalyze(bytes.NewReader(data), int64(len(data)), "prog")
		if d := sameAnalysis(info, err, want, panicked, wantErr); d != "" {
			t.Errorf("%s: %s", name, d)
		}
		if err == nil && !strings.Contains(name, "/") {
			t.Logf("%s: %+v", name, info)
		}
	}
}

// wantGaveUp analyses data with lim and fails unless the analysis gave up
// with a reason containing why.
func wantGaveUp(t *testing.T, data []byte, lim *binLimits, why string) *binReader {
	t.Helper()
	info, br, err := analyzeBytes(data, lim)
	var le *limitError
	if !errors.As(err, &le) || !errors.Is(err, errGaveUp) {
		t.Fatalf("got %+v, %v; want it not analysed (%s)", info, err, why)
	}
	if !strings.Contains(le.why, why) {
		t.Errorf("reason %q, want it to say %q", le.why, why)
	}
	t.Logf("%d bytes, %d read: %v", len(data), br.read, err)
	return br
}

// wantAnalysed is the control: one step inside the bound, the file is
// analysed.
func wantAnalysed(t *testing.T, data []byte, lim *binLimits) BinaryInfo {
	t.Helper()
	info, _, err := analyzeBytes(data, lim)
	if err != nil {
		t.Fatalf("inside the bound: %v", err)
	}
	return info
}

// Each bound trips on a file crafted past it, and the same file one step
// inside it is analysed.

func TestBinLimitProgHeaders(t *testing.T) {
	wantGaveUp(t, (&craftELF{nullProgs: 1025}).bytes(), nil, "1025 program headers, more than the 1024")
	wantAnalysed(t, (&craftELF{nullProgs: 1024}).bytes(), nil)
}

func TestBinLimitSections(t *testing.T) {
	// 1 (SHT_NULL) + 1 (.shstrtab) + nullSections.
	wantGaveUp(t, (&craftELF{nullSections: 4095}).bytes(), nil, "4097 section headers, more than the 4096")
	wantAnalysed(t, (&craftELF{nullSections: 4094}).bytes(), nil)
}

// TestBinLimitHeaderTable: an e_phentsize of 60000 makes 9 program headers
// a 540 kB table.
func TestBinLimitHeaderTable(t *testing.T) {
	craft := func(phnum int) []byte {
		b := (&craftELF{}).bytes()
		b = append(b, make([]byte, phnum*60000)...)
		b[ehdrPhnum], b[ehdrPhentsize], b[ehdrPhentsize+1] = byte(phnum), 60000&0xff, 60000>>8
		return b
	}
	wantGaveUp(t, craft(9), nil, "program headers take 540000 bytes, more than the 524288")
	wantAnalysed(t, craft(8), nil)
}

func TestBinLimitSectionNames(t *testing.T) {
	wantGaveUp(t, (&craftELF{shstrtabPad: 256 << 10}).bytes(), nil, "section name table is 262156 bytes, more than the 262144")
	wantAnalysed(t, (&craftELF{shstrtabPad: 256<<10 - 12}).bytes(), nil)
}

func TestBinLimitDynEntries(t *testing.T) {
	// n DT_NEEDED entries and a DT_NULL.
	wantGaveUp(t, craftDynamic(make([]string, 4096)...).bytes(), nil, "dynamic section is 65552 bytes, more than the 65536")
	info := wantAnalysed(t, craftDynamic(make([]string, 4095)...).bytes(), nil)
	if len(info.Needed) != maxNeeded {
		t.Errorf("%d libraries, want the first %d", len(info.Needed), maxNeeded)
	}
}

func TestBinLimitNeededLen(t *testing.T) {
	wantGaveUp(t, craftDynamic("libc.so.6", strings.Repeat("l", 1025)).bytes(), nil, "name longer than the 1024 bytes")
	info := wantAnalysed(t, craftDynamic("libc.so.6", strings.Repeat("l", 1024)).bytes(), nil)
	if len(info.Needed) != 2 || len(info.Needed[1]) != 1024 || info.Libc != libcGlibc || info.Runtime != runtimeC {
		t.Errorf("got %+v", info)
	}
}

func TestBinLimitGoVersion(t *testing.T) {
	mod := goModInfo("path\texample.com/prog")
	vers := func(n int) string { return "go1." + strings.Repeat("2", n-4) }
	wantGaveUp(t, craftGo(goBuildInfoInline(vers(1025), mod)).bytes(), nil, "version of 1025 bytes, more than the 1024")
	info := wantAnalysed(t, craftGo(goBuildInfoInline(vers(1024), mod)).bytes(), nil)
	if info.Runtime != runtimeGo || info.GoVersion != vers(1024) || info.GoPath != "example.com/prog" {
		t.Errorf("got %+v", info)
	}
	// Go 1.17 and older: string headers.
	wantGaveUp(t, craftGo(goBuildInfoPointers(0x500000, vers(1025), mod, 1025, uint64(len(mod)))).bytes(), nil, "version of 1025 bytes")
	info = wantAnalysed(t, craftGo(goBuildInfoPointers(0x500000, vers(1024), mod, 1024, uint64(len(mod)))).bytes(), nil)
	if info.Runtime != runtimeGo || info.GoPath != "example.com/prog" {
		t.Errorf("pointers: got %+v", info)
	}
}

func TestBinLimitGoModInfo(t *testing.T) {
	mod := func(n int) string { // n bytes with the sentinels
		return goModInfo("path\texample.com/prog\n" + "build\tx=" + strings.Repeat("y", n-32-len("path\texample.com/prog\nbuild\tx=\n")))
	}
	wantGaveUp(t, craftGo(goBuildInfoInline("go1.26.8", mod(1<<20+1))).bytes(), nil, "module info of 1048577 bytes, more than the 1048576")
	info := wantAnalysed(t, craftGo(goBuildInfoInline("go1.26.8", mod(1<<20))).bytes(), nil)
	if info.Runtime != runtimeGo || info.GoPath != "example.com/prog" {
		t.Errorf("got %+v", info)
	}
}

// zeroTail is a file of size bytes: head, then zeros. It stands for a huge
// file without storing one.
type zeroTail struct {
	head []byte
	size int64
}

func (z *zeroTail) ReadAt(p []byte, off int64) (int, error) {
	if off >= z.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.size-off))
	clear(p[:n])
	if off < int64(len(z.head)) {
		copy(p[:n], z.head[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// craftNoSections drops the section headers of b, as sstrip does.
func craftNoSections(b []byte) []byte {
	clear(b[ehdrShoff : ehdrShoff+8])
	clear(b[ehdrShnum : ehdrShnum+4])
	return b
}

// TestBinLimitGoSearch: a file without section headers is searched for Go's
// build info in its first writable segment, here 17 MiB of zeros.
func TestBinLimitGoSearch(t *testing.T) {
	craft := func(size uint64) *zeroTail {
		c := &craftELF{progs: []craftProg{{typ: elf.PT_LOAD, flags: elf.PF_R | elf.PF_W, off: 4096, vaddr: 0x400000, filesz: size, memsz: size}}}
		return &zeroTail{craftNoSections(c.bytes()), 4096 + int64(size)}
	}
	f := craft(16<<20 + 1)
	_, br, err := analyzeAt(f, f.size, nil)
	if !errors.Is(err, errGaveUp) || !strings.Contains(err.Error(), "no Go build info in the first 16777216 bytes of its data (16777217 bytes)") {
		t.Fatalf("got %v, want it not analysed", err)
	}
	t.Logf("%v: %d bytes read", err, br.read)
	f = craft(16 << 20)
	info, _, err := analyzeAt(f, f.size, nil)
	if err != nil || info.Runtime != runtimeC || !info.Static {
		t.Errorf("inside the bound: %+v, %v; want a static C program", info, err)
	}
}

// TestBinLimitRead: past lim.Read bytes read in all, a real program is not
// analysed.
func TestBinLimitRead(t *testing.T) {
	data, err := os.ReadFile(binLookTool(t, "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	_, br, err := analyzeBytes(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := defaultBinLimits
	lim.Read = br.read - 1
	wantGaveUp(t, data, &lim, "more than the "+strconv.FormatInt(lim.Read, 10)+" bytes eaddr reads of one binary")
	lim.Read = br.read
	if info := wantAnalysed(t, data, &lim); info.Runtime != runtimeBusyBox {
		t.Errorf("got %+v", info)
	}
}

// TestBinLimitTime: with a clock that moves 300ms per look, the fifth read
// is past the 1s budget; the give-up says to try again later.
func TestBinLimitTime(t *testing.T) {
	data, err := os.ReadFile(binLookTool(t, "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	clock := func() time.Time { now = now.Add(300 * time.Millisecond); return now }
	br := newBinReader(bytes.NewReader(data), int64(len(data)), &defaultBinLimits, clock)
	_, err = analyzeBinary(br, "busybox")
	var le *limitError
	if !errors.As(err, &le) || !le.retry || !strings.Contains(le.why, "took longer than 1s") || br.reads != 3 {
		t.Fatalf("got %v after %d reads, want it not analysed for time after 3", err, br.reads)
	}
	now = time.Time{}
	br = newBinReader(bytes.NewReader(data), int64(len(data)), &defaultBinLimits, fixedClock)
	if _, err := analyzeBinary(br, "busybox"); err != nil || br.reads < 4 {
		t.Fatalf("a clock that stands still: %v after %d reads", err, br.reads)
	}
}

// TestBinLimitScan: past lim.Scan bytes of read-only data, the search stops
// quietly (the libc is unknown), as it did before the other bounds.
func TestBinLimitScan(t *testing.T) {
	ro := make([]byte, 1<<20)
	copy(ro[900<<10:], glibcEADDRNOTAVAIL)
	c := &craftELF{sections: []craftSec{{name: ".rodata", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: ro}}}
	if info := wantAnalysed(t, c.bytes(), nil); info.Libc != libcGlibc {
		t.Errorf("whole .rodata searched: libc %q, want glibc", info.Libc)
	}
	lim := defaultBinLimits
	lim.Scan = 512 << 10
	if info := wantAnalysed(t, c.bytes(), &lim); info.Libc != LibcUnknown || info.Runtime != runtimeC {
		t.Errorf("half of it: %+v, want libc unknown", info)
	}
}

// TestBinCompressed: eaddr does not inflate a section it reads.
func TestBinCompressed(t *testing.T) {
	c := craftDynamic("libc.so.6")
	c.sections[3].flags |= elf.SHF_COMPRESSED // .rodata
	wantGaveUp(t, c.bytes(), nil, "read-only data is compressed")
	c = craftDynamic("libc.so.6")
	c.sections[1].flags |= elf.SHF_COMPRESSED // .dynstr
	wantGaveUp(t, c.bytes(), nil, "dynamic string table is compressed")
	c = craftDynamic("libc.so.6")
	c.sections[2].flags |= elf.SHF_COMPRESSED // .dynamic
	wantGaveUp(t, c.bytes(), nil, "dynamic section is compressed")
	wantAnalysed(t, craftDynamic("libc.so.6").bytes(), nil)
}

// TestBinExtendedShstrndx: debug/elf panics on a file with an extended
// section count (section 0's sh_size, 0xff00 here) and an e_shstrndx past
// it. eaddr gives up on the count; allowed that many sections, it finds the
// file is not ELF.
func TestBinExtendedShstrndx(t *testing.T) {
	const n = 0xff00
	c := &craftELF{nullSections: n - 2}
	b := c.bytes()
	shoff := binary.LittleEndian.Uint64(b[ehdrShoff:])
	binary.LittleEndian.PutUint64(b[shoff+32:], n)
	binary.LittleEndian.PutUint16(b[ehdrShnum:], 0)
	binary.LittleEndian.PutUint16(b[ehdrShstrndx:], 0xfffe)
	if _, panicked, err := refAnalyze(bytes.NewReader(b), int64(len(b)), "prog"); !panicked {
		t.Errorf("debug/elf did not panic (%v): the case is gone", err)
	}
	wantGaveUp(t, b, nil, "65280 section headers, more than the 4096")
	lim := defaultBinLimits
	lim.Sections, lim.HeaderTable = n, 64*n
	if _, _, err := analyzeBytes(b, &lim); !errors.Is(err, errNotELF) || !strings.Contains(err.Error(), "shstrndx 65534 for 65280 sections") {
		t.Errorf("got %v, want not an ELF file", err)
	}
}

// binHugeFiles are 1 TiB files (zeroTail) whose headers claim huge tables,
// strings and data that the file does hold (zeros), so that only the bounds
// stop the analysis.
func binHugeFiles() map[string]*zeroTail {
	const tib = 1 << 40
	le := binary.LittleEndian
	huge := func(b []byte) *zeroTail { return &zeroTail{b, tib} }
	files := map[string]*zeroTail{}
	rw := craftProg{typ: elf.PT_LOAD, flags: elf.PF_R | elf.PF_W, off: 1 << 20, vaddr: 0x400000}

	p := rw
	p.filesz, p.memsz = tib/2, tib/2
	files["data segment 512 GiB, no sections"] = huge(craftNoSections((&craftELF{progs: []craftProg{p}}).bytes()))
	// The worst case: a data segment just small enough to be searched to
	// its end, then the whole file is searched for libc's wording.
	p.filesz, p.memsz = 16<<20, 16<<20
	files["data segment 16 MiB, no sections"] = huge(craftNoSections((&craftELF{progs: []craftProg{p}}).bytes()))
	files["PT_INTERP of 1 TiB"] = huge((&craftELF{progs: []craftProg{{typ: elf.PT_INTERP, off: 1 << 20, filesz: tib / 2}}}).bytes())

	claim := func(s craftSec) *zeroTail {
		s.claimOff, s.claimSize = 1<<20, tib/2
		return huge((&craftELF{sections: []craftSec{s}}).bytes())
	}
	files[".rodata of 512 GiB"] = claim(craftSec{name: ".rodata", typ: elf.SHT_PROGBITS})
	files[".dynamic of 512 GiB"] = claim(craftSec{name: ".dynamic", typ: elf.SHT_DYNAMIC, link: 1})
	var many craftELF
	for range 4000 {
		many.sections = append(many.sections, craftSec{name: ".rodata.x", typ: elf.SHT_PROGBITS, claimOff: 1 << 20, claimSize: tib / 2})
	}
	files["4000 .rodata.* of 512 GiB"] = huge(many.bytes())
	// 64 DT_NEEDED entries naming the start of a 512 GiB string table
	// of zeros, then 4000 more.
	d := craftDynamic(make([]string, 4064)...)
	d.sections[1].claimOff, d.sections[1].claimSize = 1<<20, tib/2
	files["4064 DT_NEEDED in a 512 GiB .dynstr"] = huge(d.bytes())

	b := (&craftELF{nullSections: 10}).bytes()
	le.PutUint64(b[le.Uint64(b[ehdrShoff:])+32:], 1<<33)
	le.PutUint16(b[ehdrShnum:], 0)
	files["2^33 sections (extended count)"] = huge(b)
	b = (&craftELF{}).bytes()
	le.PutUint16(b[ehdrPhnum:], 65535)
	files["65535 program headers"] = huge(b)

	g := craftGo(append(append(goBuildInfoInline("", "")[:buildInfoHeaderSize], binary.AppendUvarint(nil, tib/4)...), make([]byte, 16)...))
	g.sections[0].claimSize = tib / 2
	g.progs[0].filesz, g.progs[0].memsz = tib/2, tib/2
	files["Go version of 256 GiB"] = huge(g.bytes())
	return files
}

// TestAnalyzeBinaryCostBounded: whatever a 1 TiB file claims, one analysis
// reads at most maxBinaryRead bytes and allocates at most maxBinaryAlloc.
func TestAnalyzeBinaryCostBounded(t *testing.T) {
	for name, f := range binHugeFiles() {
		var br *binReader
		var err error
		alloc := allocated(func() { _, br, err = analyzeAt(f, f.size, nil) })
		t.Logf("%-40s %9d bytes read in %5d reads, %8d allocated: %v", name, br.read, br.reads, alloc, err)
		if br.read > maxBinaryRead || alloc > maxBinaryAlloc {
			t.Errorf("%s: %d bytes read (bound %d), %d allocated (bound %d)", name, br.read, maxBinaryRead, alloc, maxBinaryAlloc)
		}
	}
}

// BenchmarkAnalyzeBinaryWorst is the costliest file binHugeFiles has: the
// bytes read and allocated per analysis are the bound in practice.
func BenchmarkAnalyzeBinaryWorst(b *testing.B) {
	f := binHugeFiles()["data segment 16 MiB, no sections"]
	b.ReportAllocs()
	var read int64
	for b.Loop() {
		_, br, err := analyzeAt(f, f.size, nil)
		if err != nil {
			b.Fatal(err)
		}
		read = br.read
	}
	b.ReportMetric(float64(read), "bytes-read/op")
}

// TestBinReaderSizeAtOpen: nothing past the size the file had when it was
// opened is read, however much more the file holds by then.
func TestBinReaderSizeAtOpen(t *testing.T) {
	data := []byte("0123456789")
	br := newBinReader(bytes.NewReader(data), 4, &defaultBinLimits, fixedClock)
	p := make([]byte, 8)
	if n, err := br.ReadAt(p, 2); n != 2 || err != io.EOF || string(p[:n]) != "23" {
		t.Errorf("ReadAt(8 at 2) = %d %q, %v; want 2 \"23\", EOF", n, p[:n], err)
	}
	if n, err := br.ReadAt(p, 4); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the size = %d, %v; want 0, EOF", n, err)
	}
	if err := br.readFull(p[:4], 1); err != io.ErrUnexpectedEOF {
		t.Errorf("readFull past the size: %v, want ErrUnexpectedEOF", err)
	}
	if err := br.readFull(p[:2], 2); err != nil || br.read != 2+3+2 {
		t.Errorf("readFull inside: %v, %d bytes read in all; want nil, 7", err, br.read)
	}
}

// TestAnalyzeBinaryClassesAndByteOrders: ELF32 and big-endian files are
// read as debug/elf reads them.
func TestAnalyzeBinaryClassesAndByteOrders(t *testing.T) {
	for _, c := range []craftELF{{class32: true}, {class32: true, bigEndian: true}, {bigEndian: true}} {
		c := c
		info := wantAnalysed(t, craftDynamicAs(&c, "libcurl.so.4", "libc.so.6").bytes(), nil)
		if info.Interp != "/lib/ld-linux.so.2" || info.Libc != libcGlibc || strings.Join(info.Needed, ",") != "libcurl.so.4,libc.so.6" {
			t.Errorf("class32 %v big-endian %v: %+v", c.class32, c.bigEndian, info)
		}
	}
	s := &craftELF{class32: true, sections: []craftSec{{name: ".rodata.str1.1", typ: elf.SHT_PROGBITS, data: muslEADDRNOTAVAIL}}}
	if info := wantAnalysed(t, s.bytes(), nil); !info.Static || info.Libc != libcMusl {
		t.Errorf("static ELF32: %+v, want static musl", info)
	}
	g := craftGo(goBuildInfoInline("go1.26.8", goModInfo("path\texample.com/prog")))
	g.class32, g.bigEndian = true, true
	if info := wantAnalysed(t, g.bytes(), nil); info.Runtime != runtimeGo || info.GoPath != "example.com/prog" {
		t.Errorf("Go ELF32 big-endian: %+v", info)
	}
	for name, data := range binHostileSeeds() {
		if strings.Contains(name, "elf32") || strings.Contains(name, "msb") {
			checkAnalysis(t, data) // and the reference agrees
		}
	}
}
