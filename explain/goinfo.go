package explain

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"runtime/debug"
)

// Go's build info, as debug/buildinfo finds it in an ELF file: a 32-byte
// header starting with buildInfoMagic, 16-byte aligned, at the start of the
// .go.buildinfo section or somewhere in the first writable segment, then
// the version and the module info, inline (Go 1.18 on) or through pointers.
var buildInfoMagic = []byte("\xff Go buildinf:")

const (
	buildInfoAlign      = 16
	buildInfoHeaderSize = 32
	goSearchChunk       = 1 << 20
)

// errNotGo is any reason debug/buildinfo.Read would fail: not a Go program.
var errNotGo = errors.New("not a Go executable")

// goBuildInfo returns a Go program's toolchain version and main package
// path, reading what debug/buildinfo.Read reads and deciding as it does,
// but searching at most lim.GoSearch bytes and reading strings only up to
// lim.GoVersion and lim.GoModInfo bytes, and only once the file is known
// to hold them (debug/buildinfo reads as far as a claimed length goes
// before it finds the file too short). ok is false for a file that is not
// (readable as) Go; err is only a bound tripped.
func (f *elfFile) goBuildInfo() (version, path string, ok bool, err error) {
	vers, mod, err := f.rawGoBuildInfo()
	switch {
	case errors.Is(err, errGaveUp):
		return "", "", false, err
	case err != nil:
		return "", "", false, nil
	}
	bi, err := debug.ParseBuildInfo(mod)
	if err != nil {
		return "", "", false, nil
	}
	return vers, bi.Path, true, nil
}

func (f *elfFile) rawGoBuildInfo() (vers, mod string, err error) {
	start, size := f.goDataStart()
	if size == 0 {
		return "", "", errNotGo
	}
	addr, err := f.searchGoMagic(start, size)
	if err != nil {
		return "", "", err
	}
	var header [buildInfoHeaderSize]byte
	if err := f.readAddr(addr, header[:]); err != nil {
		return "", "", err
	}
	const flagsEndianBig, flagsVersionInl = 0x1, 0x2
	lim := f.r.lim
	if flags := header[15]; flags&flagsVersionInl != 0 {
		vers, addr, err = f.goInlineString(addr+buildInfoHeaderSize, "version", lim.GoVersion)
		if err == nil {
			mod, _, err = f.goInlineString(addr, "module info", lim.GoModInfo)
		}
	} else {
		var bo binary.ByteOrder = binary.LittleEndian
		if flags&flagsEndianBig != 0 {
			bo = binary.BigEndian
		}
		ptrSize := int(header[14])
		if ptrSize != 4 && ptrSize != 8 {
			return "", "", errNotGo
		}
		vers, err = f.goPointedString(bo, ptrSize, readPtr(bo, header[16:], ptrSize), "version", lim.GoVersion)
		if err == nil {
			mod, err = f.goPointedString(bo, ptrSize, readPtr(bo, header[16+ptrSize:], ptrSize), "module info", lim.GoModInfo)
		}
	}
	if err != nil || vers == "" {
		return "", "", errOr(err, errNotGo)
	}
	if len(mod) >= 33 && mod[len(mod)-17] == '\n' {
		mod = mod[16 : len(mod)-16] // the sentinels around it
	} else {
		mod = ""
	}
	return vers, mod, nil
}

func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

func readPtr(bo binary.ByteOrder, b []byte, ptrSize int) uint64 {
	if ptrSize == 4 {
		return uint64(bo.Uint32(b))
	}
	return bo.Uint64(b)
}

// goDataStart is where the build info is searched: the .go.buildinfo
// section, else the first writable, not executable PT_LOAD segment.
func (f *elfFile) goDataStart() (addr, size uint64) {
	for i := range f.sections {
		if s := &f.sections[i]; f.nameIs(s, ".go.buildinfo") {
			return s.addr, s.size
		}
	}
	for _, p := range f.progs {
		if p.typ == elf.PT_LOAD && p.flags&(elf.PF_X|elf.PF_W) == elf.PF_W {
			return p.vaddr, p.memsz
		}
	}
	return 0, 0
}

// searchGoMagic finds the build info header in [start, start+size), in
// chunks read through the segment that holds each chunk's start, as
// debug/buildinfo does (including its quirk: after a misaligned match the
// address returned is the chunk's start plus the index in what follows
// it). Past lim.GoSearch bytes searched without a match, it gives up.
func (f *elfFile) searchGoMagic(start, size uint64) (uint64, error) {
	end := start + size
	if end < start {
		return 0, errNotGo
	}
	start = (start + buildInfoAlign - 1) &^ (buildInfoAlign - 1)
	var buf []byte
	for searched := uint64(0); start < end; searched += goSearchChunk {
		remaining := end - start
		chunk := min(uint64(goSearchChunk), remaining)
		if searched+chunk > uint64(f.r.lim.GoSearch) {
			return 0, gaveUp("no Go build info in the first %d bytes of its data (%d bytes): eaddr searches no further", searched, size)
		}
		if buf == nil {
			buf = make([]byte, chunk)
		}
		buf = buf[:chunk]
		p, rel, ok := f.progAt(start)
		if !ok {
			return 0, errNotGo
		}
		n, err := f.readProg(p, rel, buf)
		if n > 0 && err == io.EOF {
			err = nil
		}
		if err != nil {
			return 0, errOr(gaveUpOnly(err), errNotGo)
		}
		for data := buf[:n]; len(data) > 0; {
			i := bytes.Index(data, buildInfoMagic)
			switch {
			case i < 0:
				data = nil
			case remaining-uint64(i) < buildInfoHeaderSize:
				return 0, errNotGo
			case i%buildInfoAlign != 0:
				next := (i + buildInfoAlign - 1) &^ (buildInfoAlign - 1)
				if next > len(data) {
					return 0, errNotGo
				}
				data = data[next:]
			default:
				return start + uint64(i), nil
			}
		}
		start += chunk
	}
	return 0, errNotGo
}

// gaveUpOnly is err when it is a bound tripped, else nil.
func gaveUpOnly(err error) error {
	if errors.Is(err, errGaveUp) {
		return err
	}
	return nil
}

// progAt is the first segment whose file bytes hold the address addr
// (debug/buildinfo's test, wrap-around included), and addr's distance
// from the segment's start.
func (f *elfFile) progAt(addr uint64) (*elfProg, uint64, bool) {
	for i := range f.progs {
		p := &f.progs[i]
		if p.vaddr <= addr && addr <= p.vaddr+p.filesz-1 {
			return p, addr - p.vaddr, true
		}
	}
	return nil, 0, false
}

// readAddr reads len(b) bytes at the address addr, all of them or fails.
func (f *elfFile) readAddr(addr uint64, b []byte) error {
	p, rel, ok := f.progAt(addr)
	if !ok {
		return errNotGo
	}
	n, err := f.readProg(p, rel, b)
	if n < len(b) {
		return errOr(gaveUpOnly(err), errNotGo)
	}
	return nil
}

// readAddrString reads n bytes at addr into a string. The bytes must be in
// the file (else not Go, as debug/buildinfo finds once it has read what
// there is), and more than max of them is a bound tripped.
func (f *elfFile) readAddrString(addr, n uint64, what string, max int) (string, error) {
	p, rel, ok := f.progAt(addr)
	if !ok {
		return "", errNotGo
	}
	if n == 0 {
		return "", nil
	}
	if avail := p.filesz - rel; rel >= p.filesz || n > avail || !f.inFile(p.off+rel, n) {
		return "", errNotGo
	}
	if n > uint64(max) {
		return "", gaveUp("its Go build info has a %s of %d bytes, more than the %d eaddr reads", what, n, max)
	}
	b := make([]byte, n)
	if err := f.readAddr(addr, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// goInlineString reads a varint-prefixed string at addr and returns the
// address after it.
func (f *elfFile) goInlineString(addr uint64, what string, max int) (string, uint64, error) {
	var b [binary.MaxVarintLen64]byte
	if err := f.readAddr(addr, b[:]); err != nil {
		return "", 0, err
	}
	n, k := binary.Uvarint(b[:])
	if k <= 0 {
		return "", 0, errNotGo
	}
	s, err := f.readAddrString(addr+uint64(k), n, what, max)
	return s, addr + uint64(k) + n, err
}

// goPointedString reads a Go string header (pointer, length) at addr and
// the string it points to; as in debug/buildinfo, one that cannot be read
// is "".
func (f *elfFile) goPointedString(bo binary.ByteOrder, ptrSize int, addr uint64, what string, max int) (string, error) {
	var b [16]byte
	hdr := b[:2*ptrSize]
	if err := f.readAddr(addr, hdr); err != nil {
		return "", gaveUpOnly(err)
	}
	s, err := f.readAddrString(readPtr(bo, hdr, ptrSize), readPtr(bo, hdr[ptrSize:], ptrSize), what, max)
	return s, gaveUpOnly(err)
}
