package explain

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// elfFile is what eaddr reads of an ELF file: its program and section
// headers and its section names, each table read once and only up to
// binLimits. It accepts and rejects what debug/elf.NewFile does (the
// same checks, in the same order), but never reads a table or a string
// because the file claims it is large: debug/elf copies each section name
// out of .shstrtab (65535 sections naming a 1 MiB name are 64 GiB), reads
// any table whole, and panics on some files (an e_shstrndx past an
// extended section count). Sections are never decompressed (SHF_COMPRESSED
// is ignored: no section eaddr reads is compressed in a real program).
type elfFile struct {
	r        *binReader
	class64  bool
	bo       binary.ByteOrder
	progs    []elfProg
	sections []elfSection
	// names is the section name string table (nil without one); every
	// section's name offset is below lastNUL, so each name is terminated.
	names []byte
}

type elfProg struct {
	typ                       elf.ProgType
	flags                     elf.ProgFlag
	off, vaddr, filesz, memsz uint64
}

type elfSection struct {
	name             uint32 // offset in names
	typ              elf.SectionType
	addr, off, size  uint64
	link             uint32
	compressedOrZlib bool // SHF_COMPRESSED, or a .zdebug name: debug/elf would decompress it
}

// elfHeader is the part of the ELF header that locates the tables.
type elfHeader struct {
	phoff, shoff                 int64
	phentsize, phnum             int
	shentsize, shnum, shstrndx   int
	wantPhentsize, wantShentsize int
}

// parseELF reads the headers of the ELF file in r. A file debug/elf would
// reject is an error wrapping errNotELF; one past r's limits wraps errGaveUp.
func parseELF(r *binReader) (*elfFile, error) {
	var ident [elf.EI_NIDENT]byte
	if err := r.readFull(ident[:], 0); err != nil {
		return nil, notELF(err)
	}
	if string(ident[:4]) != elf.ELFMAG {
		return nil, notELF(errors.New("bad magic number"))
	}
	f := &elfFile{r: r}
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS32:
	case elf.ELFCLASS64:
		f.class64 = true
	default:
		return nil, notELF(fmt.Errorf("unknown ELF class %d", ident[elf.EI_CLASS]))
	}
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		f.bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		f.bo = binary.BigEndian
	default:
		return nil, notELF(fmt.Errorf("unknown ELF data encoding %d", ident[elf.EI_DATA]))
	}
	if elf.Version(ident[elf.EI_VERSION]) != elf.EV_CURRENT {
		return nil, notELF(fmt.Errorf("unknown ELF version %d", ident[elf.EI_VERSION]))
	}
	h, err := f.header()
	if err != nil {
		return nil, err
	}
	if err := f.readProgs(h); err != nil {
		return nil, err
	}
	if err := f.readSections(h); err != nil {
		return nil, err
	}
	return f, f.readNames(h)
}

func notELF(err error) error {
	if errors.Is(err, errGaveUp) {
		return err
	}
	return fmt.Errorf("%w: %v", errNotELF, err)
}

// header reads the ELF header after e_ident and checks it as debug/elf does.
func (f *elfFile) header() (elfHeader, error) {
	var h elfHeader
	var b [64]byte
	hdr := b[:52]
	if f.class64 {
		hdr = b[:64]
	}
	if err := f.r.readFull(hdr, 0); err != nil {
		return h, notELF(err)
	}
	bo := f.bo
	var version uint32
	if f.class64 {
		version = bo.Uint32(hdr[20:])
		h.phoff, h.shoff = int64(bo.Uint64(hdr[32:])), int64(bo.Uint64(hdr[40:]))
		hdr = hdr[54:]
		h.wantPhentsize, h.wantShentsize = 56, 64
	} else {
		version = bo.Uint32(hdr[20:])
		h.phoff, h.shoff = int64(bo.Uint32(hdr[28:])), int64(bo.Uint32(hdr[32:]))
		hdr = hdr[42:]
		h.wantPhentsize, h.wantShentsize = 32, 40
	}
	h.phentsize, h.phnum = int(bo.Uint16(hdr[0:])), int(bo.Uint16(hdr[2:]))
	h.shentsize, h.shnum, h.shstrndx = int(bo.Uint16(hdr[4:])), int(bo.Uint16(hdr[6:])), int(bo.Uint16(hdr[8:]))
	switch {
	case elf.Version(version) != elf.EV_CURRENT: // debug/elf compares its low byte only
		return h, notELF(fmt.Errorf("mismatched ELF version %d", version))
	case h.shoff < 0:
		return h, notELF(fmt.Errorf("invalid shoff %d", h.shoff))
	case h.phoff < 0:
		return h, notELF(fmt.Errorf("invalid phoff %d", h.phoff))
	case h.shoff == 0 && h.shnum != 0:
		return h, notELF(fmt.Errorf("invalid ELF shnum %d for shoff=0", h.shnum))
	case h.shnum > 0 && h.shstrndx >= h.shnum:
		return h, notELF(fmt.Errorf("invalid ELF shstrndx %d", h.shstrndx))
	case h.phnum > 0 && h.phentsize < h.wantPhentsize:
		return h, notELF(fmt.Errorf("invalid ELF phentsize %d", h.phentsize))
	}
	return h, nil
}

// table reads n entries of entsize bytes at off: an error wrapping
// errNotELF when the file does not hold them, errGaveUp when it holds more
// than max entries or lim.HeaderTable bytes of them.
func (f *elfFile) table(what string, off int64, n, entsize, max int) ([]byte, error) {
	size := uint64(n) * uint64(entsize)
	if size == 0 {
		return nil, nil
	}
	if off > f.r.size || size > uint64(f.r.size-off) {
		return nil, notELF(fmt.Errorf("%d %s of %d bytes at %d: past the end of the file (%d bytes)", n, what, entsize, off, f.r.size))
	}
	if n > max {
		return nil, gaveUp("it has %d %s, more than the %d eaddr reads", n, what, max)
	}
	if size > uint64(f.r.lim.HeaderTable) {
		return nil, gaveUp("its %s take %d bytes, more than the %d eaddr reads", what, size, f.r.lim.HeaderTable)
	}
	b := make([]byte, size)
	if err := f.r.readFull(b, off); err != nil {
		return nil, notELF(err)
	}
	return b, nil
}

func (f *elfFile) readProgs(h elfHeader) error {
	data, err := f.table("program headers", h.phoff, h.phnum, h.phentsize, f.r.lim.ProgHeaders)
	if err != nil {
		return err
	}
	bo := f.bo
	f.progs = make([]elfProg, h.phnum)
	for i := range f.progs {
		e, p := data[i*h.phentsize:], &f.progs[i]
		p.typ = elf.ProgType(bo.Uint32(e))
		if f.class64 {
			p.flags = elf.ProgFlag(bo.Uint32(e[4:]))
			p.off, p.vaddr = bo.Uint64(e[8:]), bo.Uint64(e[16:])
			p.filesz, p.memsz = bo.Uint64(e[32:]), bo.Uint64(e[40:])
		} else {
			p.off, p.vaddr = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
			p.filesz, p.memsz = uint64(bo.Uint32(e[16:])), uint64(bo.Uint32(e[20:]))
			p.flags = elf.ProgFlag(bo.Uint32(e[24:]))
		}
		if int64(p.off) < 0 {
			return notELF(fmt.Errorf("invalid program header offset %d", p.off))
		}
		if int64(p.filesz) < 0 {
			return notELF(fmt.Errorf("invalid program header file size %d", p.filesz))
		}
	}
	return nil
}

// extendedCount reads section 0, where a file with SHN_LORESERVE or more
// sections keeps their count (sh_size) and, for e_shstrndx SHN_XINDEX, the
// name table's index (sh_link).
func (f *elfFile) extendedCount(h *elfHeader) error {
	sh := make([]byte, h.wantShentsize)
	if err := f.r.readFull(sh, h.shoff); err != nil {
		return notELF(err)
	}
	var typ, link uint32
	var n uint64
	if f.class64 {
		typ, n, link = f.bo.Uint32(sh[4:]), f.bo.Uint64(sh[32:]), f.bo.Uint32(sh[40:])
	} else {
		typ, n, link = f.bo.Uint32(sh[4:]), uint64(f.bo.Uint32(sh[20:])), f.bo.Uint32(sh[24:])
	}
	if elf.SectionType(typ) != elf.SHT_NULL {
		return notELF(fmt.Errorf("invalid type %d of the initial section", typ))
	}
	if int64(n) < 0 || n < uint64(elf.SHN_LORESERVE) {
		return notELF(fmt.Errorf("invalid ELF shnum %d contained in sh_size", n))
	}
	h.shnum = int(min(n, 1<<40)) // a count so large is past the file anyway
	if h.shstrndx == int(elf.SHN_XINDEX) {
		h.shstrndx = int(link)
		if h.shstrndx < int(elf.SHN_LORESERVE) {
			return notELF(fmt.Errorf("invalid ELF shstrndx %d contained in sh_link", h.shstrndx))
		}
	}
	return nil
}

func (f *elfFile) readSections(h elfHeader) error {
	if h.shoff > 0 && h.shnum == 0 {
		if err := f.extendedCount(&h); err != nil {
			return err
		}
	}
	if h.shnum > 0 && h.shentsize < h.wantShentsize {
		return notELF(fmt.Errorf("invalid ELF shentsize %d", h.shentsize))
	}
	data, err := f.table("section headers", h.shoff, h.shnum, h.shentsize, f.r.lim.Sections)
	if err != nil {
		return err
	}
	bo := f.bo
	f.sections = make([]elfSection, h.shnum)
	for i := range f.sections {
		e, s := data[i*h.shentsize:], &f.sections[i]
		s.name, s.typ = bo.Uint32(e), elf.SectionType(bo.Uint32(e[4:]))
		var flags elf.SectionFlag
		if f.class64 {
			flags = elf.SectionFlag(bo.Uint64(e[8:]))
			s.addr, s.off, s.size = bo.Uint64(e[16:]), bo.Uint64(e[24:]), bo.Uint64(e[32:])
			s.link = bo.Uint32(e[40:])
		} else {
			flags = elf.SectionFlag(bo.Uint32(e[8:]))
			s.addr, s.off, s.size = uint64(bo.Uint32(e[12:])), uint64(bo.Uint32(e[16:])), uint64(bo.Uint32(e[20:]))
			s.link = bo.Uint32(e[24:])
		}
		s.compressedOrZlib = flags&elf.SHF_COMPRESSED != 0
		if int64(s.off) < 0 {
			return notELF(fmt.Errorf("invalid section offset %d", int64(s.off)))
		}
		if int64(s.size) < 0 {
			return notELF(fmt.Errorf("invalid section size %d", int64(s.size)))
		}
	}
	if h.shstrndx >= len(f.sections) && len(f.sections) > 0 {
		// debug/elf panics here (index out of range).
		return notELF(fmt.Errorf("invalid ELF shstrndx %d for %d sections", h.shstrndx, len(f.sections)))
	}
	return nil
}

// readNames reads the section name string table and checks every name
// offset, as debug/elf does, without copying a name out: each is compared
// in place (nameIs), so the cost is the table's size, not sections × names.
func (f *elfFile) readNames(h elfHeader) error {
	if len(f.sections) == 0 || h.shstrndx == 0 {
		return nil // no name table: every name is ""
	}
	s := &f.sections[h.shstrndx]
	if s.typ != elf.SHT_STRTAB {
		return notELF(fmt.Errorf("invalid ELF section name string table type %v", s.typ))
	}
	data, err := f.sectionData(s, "section name table", f.r.lim.SectionNames)
	if err != nil {
		return notELF(err)
	}
	last := bytes.LastIndexByte(data, 0)
	for i := range f.sections {
		if int64(f.sections[i].name) > int64(last) {
			return notELF(fmt.Errorf("bad section name index %d", f.sections[i].name))
		}
	}
	f.names = data
	for i := range f.sections {
		if f.nameHasPrefix(&f.sections[i], ".zdebug") {
			f.sections[i].compressedOrZlib = true // debug/elf would inflate it
		}
	}
	return nil
}

// sectionData reads a section's bytes, as debug/elf's Section.Data would,
// but gives up on more than max bytes and on a compressed section.
func (f *elfFile) sectionData(s *elfSection, what string, max int64) ([]byte, error) {
	switch {
	case s.typ == elf.SHT_NOBITS && s.size > 0:
		return nil, fmt.Errorf("%s: unexpected read from SHT_NOBITS section", what)
	case s.typ == elf.SHT_NOBITS:
		return []byte{}, nil
	case !f.inFile(s.off, s.size):
		return nil, fmt.Errorf("%s of %d bytes at %d: past the end of the file (%d bytes)", what, s.size, s.off, f.r.size)
	case s.compressedOrZlib:
		return nil, gaveUp("its %s is compressed, and eaddr does not inflate sections", what)
	case s.size > uint64(max):
		return nil, gaveUp("its %s is %d bytes, more than the %d eaddr reads", what, s.size, max)
	}
	b := make([]byte, s.size)
	if err := f.r.readFull(b, int64(s.off)); err != nil {
		return nil, err
	}
	return b, nil
}

// inFile reports whether size bytes at off lie within the file.
func (f *elfFile) inFile(off, size uint64) bool {
	return off <= uint64(f.r.size) && size <= uint64(f.r.size)-off
}

// nameIs reports whether s is called name, comparing in place.
func (f *elfFile) nameIs(s *elfSection, name string) bool {
	n := int(s.name)
	return f.nameHasPrefix(s, name) && n+len(name) < len(f.names) && f.names[n+len(name)] == 0
}

func (f *elfFile) nameHasPrefix(s *elfSection, prefix string) bool {
	n := int(s.name)
	return f.names != nil && n+len(prefix) <= len(f.names) && string(f.names[n:n+len(prefix)]) == prefix
}

// sectionByType is the first section of type t, or nil.
func (f *elfFile) sectionByType(t elf.SectionType) *elfSection {
	for i := range f.sections {
		if f.sections[i].typ == t {
			return &f.sections[i]
		}
	}
	return nil
}

// readProg reads p's file bytes from rel (bytes from p's start) into b, as
// a reader of the segment would: at most p.filesz-rel bytes, io.EOF past it.
func (f *elfFile) readProg(p *elfProg, rel uint64, b []byte) (int, error) {
	if rel >= p.filesz {
		if len(b) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	off := p.off + rel
	if int64(off) < 0 {
		return 0, errors.New("segment offset overflows")
	}
	short := uint64(len(b)) > p.filesz-rel
	if short {
		b = b[:p.filesz-rel]
	}
	n, err := f.r.ReadAt(b, int64(off))
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// interp reads PT_INTERP: a dynamic program's loader (at most
// maxInterpLen bytes of it); none means static.
func (f *elfFile) interp() (interp string, static bool, err error) {
	for i := range f.progs {
		p := &f.progs[i]
		if p.typ != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, min(p.filesz, maxInterpLen))
		n, err := f.readProg(p, 0, buf)
		if n < len(buf) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
				if n == 0 {
					err = io.EOF
				}
			}
			return "", false, err
		}
		if i := bytes.IndexByte(buf, 0); i >= 0 {
			buf = buf[:i]
		}
		return string(buf), false, nil
	}
	return "", true, nil
}

// needed returns the DT_NEEDED names of the SHT_DYNAMIC section, the first
// maxNeeded of them, as debug/elf's DynString would list them: an error
// (the libraries unknown) where it fails, errGaveUp past the limits. Each
// name is read alone, at most lim.NeededLen bytes, never the whole string
// table (debug/elf copies each name out of it: 4096 entries naming a 1 MiB
// string are 4 GiB).
func (f *elfFile) needed() ([]string, error) {
	ds := f.sectionByType(elf.SHT_DYNAMIC)
	if ds == nil {
		return nil, nil
	}
	entsize := uint64(8)
	if f.class64 {
		entsize = 16
	}
	lim := f.r.lim
	d, err := f.sectionData(ds, "dynamic section", int64(lim.DynEntries)*int64(entsize))
	if err != nil {
		return nil, err
	}
	if uint64(len(d))%entsize != 0 {
		return nil, errors.New("length of dynamic section is not a multiple of dynamic entry size")
	}
	if ds.link == 0 || int(ds.link) >= len(f.sections) {
		return nil, errors.New("section has invalid string table link")
	}
	str := &f.sections[ds.link]
	switch {
	case str.typ == elf.SHT_NOBITS && str.size > 0:
		return nil, errors.New("string table: unexpected read from SHT_NOBITS section")
	case str.typ != elf.SHT_NOBITS && !f.inFile(str.off, str.size):
		return nil, errors.New("string table: past the end of the file")
	case str.compressedOrZlib:
		return nil, gaveUp("its dynamic string table is compressed, and eaddr does not inflate sections")
	}
	var all []string
	for ; len(d) > 0 && len(all) < maxNeeded; d = d[entsize:] {
		var tag, v uint64
		if f.class64 {
			tag, v = f.bo.Uint64(d), f.bo.Uint64(d[8:])
		} else {
			tag, v = uint64(f.bo.Uint32(d)), uint64(f.bo.Uint32(d[4:]))
		}
		if tag != uint64(elf.DT_NEEDED) {
			continue
		}
		s, ok, err := f.stringAt(str, v)
		if err != nil {
			return nil, err
		}
		if ok {
			all = append(all, s)
		}
	}
	return all, nil
}

// stringAt is the NUL-terminated string at off in the string table str
// (ok false where debug/elf's getString fails: off past the table, no NUL
// before its end), reading at most lim.NeededLen+1 bytes.
func (f *elfFile) stringAt(str *elfSection, off uint64) (string, bool, error) {
	if int64(off) < 0 || off >= str.size {
		return "", false, nil
	}
	max := uint64(f.r.lim.NeededLen) + 1
	buf := make([]byte, min(max, str.size-off))
	if err := f.r.readFull(buf, int64(str.off+off)); err != nil {
		return "", false, err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return string(buf[:i]), true, nil
	}
	if uint64(len(buf)) == max {
		return "", false, gaveUp("a library it needs (DT_NEEDED) has a name longer than the %d bytes eaddr reads", f.r.lim.NeededLen)
	}
	return "", false, nil // not terminated within the table
}
