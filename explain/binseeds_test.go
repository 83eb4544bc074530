package explain

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// binRealPrograms returns the real programs the tests cut up, by name: a
// static glibc BusyBox, dynamic python3 and curl, a static Go program, a
// static and a dynamic C program (musl, glibc) built here.
func binRealPrograms(tb testing.TB) map[string]string {
	tb.Helper()
	dir := tb.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(binCProgram), 0o644); err != nil {
		tb.Fatal(err)
	}
	progs := map[string]string{
		"busybox": binLookTool(tb, "busybox"),
		"curl":    testenv.Program(tb, "curl", "curl"),
		"python3": testenv.Program(tb, "python3", "python3"),
		"go":      binBuildGo(tb, dir, "package main\n\nfunc main() {}\n", false),
	}
	for name, cc := range map[string][]string{
		"musl-static": {binLookTool(tb, "musl-gcc"), "-static", "-Os"},
		"gcc-dynamic": {binLookTool(tb, "gcc"), "-O2"},
	} {
		out := filepath.Join(dir, name)
		if b, err := exec.Command(cc[0], append(cc[1:], "-o", out, src)...).CombinedOutput(); err != nil {
			tb.Fatalf("%s: %v\n%s", cc[0], err, b)
		}
		progs[name] = out
	}
	return progs
}

// binCuts are the lengths a real program is truncated to: inside the ELF
// header, inside the program headers, after them, at page and 64 KiB
// boundaries, halfway, and inside the section headers at the end.
func binCuts(n int) []int {
	cuts := []int{0, 3, 4, 16, 20, 52, 63, 64, 64 + 56*2 + 7, 4096, 64 << 10, n / 2, n - 2000, n - 100, n - 1, n}
	var out []int
	for _, c := range cuts {
		if c >= 0 && c <= n && (len(out) == 0 || c > out[len(out)-1]) {
			out = append(out, c)
		}
	}
	return out
}

// binFuzzSeedLimit keeps FuzzAnalyzeBinary's seeds small enough to run
// and mutate quickly: every worker runs each seed once before it mutates,
// and CI gives the target 10 s in all. With cuts up to 2 MiB (123 seeds)
// that took 5 of them on a quiet 2-core machine and more than 10 beside
// other work (4,240 inputs in 10 s, the median of 7 runs); at 256 KiB, 38,000
// to 43,000. The small programs (musl-static, gcc-dynamic) keep every cut,
// the end of their section headers too; the cuts of the large ones past
// the limit are left to the reference test (binary_ref_test.go), which
// reads them whole.
const binFuzzSeedLimit = 256 << 10

// binRealSeeds are the real programs, whole and cut.
func binRealSeeds(tb testing.TB, limit int) map[string][]byte {
	seeds := map[string][]byte{}
	for name, path := range binRealPrograms(tb) {
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range binCuts(len(data)) {
			if c <= limit {
				seeds[name+"/"+strconv.Itoa(c)] = data[:c]
			}
		}
	}
	return seeds
}

// binHostileSeeds are crafted files, each claiming too much in one way.
func binHostileSeeds() map[string][]byte {
	le := binary.LittleEndian
	seeds := map[string][]byte{}
	put16 := func(b []byte, off int, v uint16) []byte { le.PutUint16(b[off:], v); return b }

	seeds["dynamic"] = craftDynamic("libcurl.so.4", "libc.so.6").bytes()
	seeds["dynamic-elf32"] = craftDynamicAs(&craftELF{class32: true}, "libc.so.6").bytes()
	seeds["dynamic-elf32-msb"] = craftDynamicAs(&craftELF{class32: true, bigEndian: true}, "libc.so.6").bytes()
	seeds["dynamic-elf64-msb"] = craftDynamicAs(&craftELF{bigEndian: true}, "libc.so.6").bytes()
	static32 := &craftELF{class32: true, sections: []craftSec{{name: ".rodata.str1.1", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: muslEADDRNOTAVAIL}}}
	seeds["static-musl-elf32"] = static32.bytes()
	go32 := craftGo(goBuildInfoInline("go1.26.8", goModInfo("path\texample.com/prog")))
	go32.class32, go32.bigEndian = true, true
	seeds["go-elf32-msb"] = go32.bytes()
	seeds["go-inline"] = craftGo(goBuildInfoInline("go1.26.8", goModInfo("path\texample.com/prog\nmod\texample.com/prog\t(devel)\t"))).bytes()
	seeds["go-pointers"] = craftGo(goBuildInfoPointers(0x500000, "go1.16", goModInfo("path\tx"), 6, 23)).bytes()

	// Too many program headers, section headers; a huge e_phentsize.
	seeds["phnum-1025"] = (&craftELF{nullProgs: 1025}).bytes()
	seeds["phnum-65535-absent"] = put16((&craftELF{}).bytes(), ehdrPhnum, 65535)
	seeds["shnum-4100"] = (&craftELF{nullSections: 4100}).bytes()
	seeds["phentsize-65535"] = put16(put16((&craftELF{}).bytes(), ehdrPhnum, 3), ehdrPhentsize, 65535)
	// Extended section numbering: e_shnum 0, the count in section 0.
	ext := (&craftELF{}).bytes()
	le.PutUint64(ext[le.Uint64(ext[ehdrShoff:])+32:], 1<<32)
	seeds["shnum-extended"] = put16(ext, ehdrShnum, 0)

	// Section names: a huge .shstrtab, one past EOF, name offsets past it.
	seeds["shstrtab-300k"] = (&craftELF{shstrtabPad: 300 << 10}).bytes()
	past := craftDynamic("libc.so.6")
	past.sections[1].claimOff = 1 << 40 // .dynstr past EOF
	seeds["dynstr-past-eof"] = past.bytes()
	name := craftDynamic("libc.so.6")
	name.sections[3].nameOff = 1 << 30
	seeds["name-past-shstrtab"] = name.bytes()
	// 4000 sections all named by one 100 KiB name: quadratic for debug/elf.
	quad := &craftELF{shstrtabPad: 100 << 10}
	for range 4000 {
		quad.sections = append(quad.sections, craftSec{typ: elf.SHT_PROGBITS, nameOff: uint32(1 + 4000 + len(".shstrtab\x00"))})
	}
	seeds["names-quadratic"] = quad.bytes()

	// .dynamic: too many entries, looping on itself, a long DT_NEEDED name.
	seeds["dynamic-4097"] = craftDynamic(make([]string, 4097)...).bytes()
	loop := craftDynamic("libc.so.6")
	loop.sections[2].link = 3 // its own string table
	seeds["dynamic-self-link"] = loop.bytes()
	seeds["needed-2k"] = craftDynamic(strings.Repeat("l", 2048)).bytes()

	// PT_INTERP claiming a terabyte, and a long one.
	interp := craftDynamic("libc.so.6")
	interp.sections[0].data = []byte(strings.Repeat("/", 5000))
	seeds["interp-5000"] = interp.bytes()
	interp.progs[0] = craftProg{typ: elf.PT_INTERP, off: 64, filesz: 1 << 40}
	seeds["interp-1t"] = interp.bytes()

	// Go build info claiming huge lengths, present or not.
	seeds["go-version-claims-2^62"] = craftGo(append(append(goBuildInfoInline("", "")[:buildInfoHeaderSize], binary.AppendUvarint(nil, 1<<62)...), make([]byte, 16)...)).bytes()
	seeds["go-version-2k"] = craftGo(goBuildInfoInline("go"+strings.Repeat("1", 2048), "")).bytes()
	seeds["go-pointers-claims"] = craftGo(goBuildInfoPointers(0x500000, "go1.16", "", 1<<40, 1<<40)).bytes()
	noSec := craftGo(goBuildInfoInline("go1.26.8", ""))
	b := noSec.bytes()
	le.PutUint64(b[ehdrShoff:], 0)
	seeds["go-no-sections"] = put16(put16(b, ehdrShnum, 0), ehdrShstrndx, 0)

	// A compressed .rodata.
	comp := craftDynamic("libc.so.6")
	comp.sections[3].flags |= elf.SHF_COMPRESSED
	seeds["rodata-compressed"] = comp.bytes()
	return seeds
}
