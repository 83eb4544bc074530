package explain

import (
	"debug/elf"
	"encoding/binary"
)

// craftELF lays out an ELF executable (little-endian ELF64 unless told) for the bound tests and
// the fuzz seeds: the ELF header, the program headers, each section's data
// (16-byte aligned), .shstrtab, then the section headers. What a test wants
// wrong it sets with the claim fields, or edits the bytes afterwards (the
// offsets are the ehdr* constants).
type craftELF struct {
	progs    []craftProg
	sections []craftSec // sections 1..n: section 0 (SHT_NULL) is added
	// nullProgs and nullSections are PT_NULL and SHT_NULL entries added to
	// the tables, to make them large.
	nullProgs, nullSections int
	// shstrtabPad is bytes of non-NUL names appended to .shstrtab.
	shstrtabPad int
	// class32 and bigEndian make an ELF32 or big-endian file (the ehdr*
	// offsets are ELF64's).
	class32, bigEndian bool
}

type craftSec struct {
	name  string
	typ   elf.SectionType
	flags elf.SectionFlag
	addr  uint64
	link  uint32
	data  []byte
	// claimSize and claimOff, when nonzero, are written as sh_size and
	// sh_offset instead of the data's.
	claimSize, claimOff uint64
	// nameOff, when nonzero, is written as sh_name instead of the name's.
	nameOff uint32
}

type craftProg struct {
	typ   elf.ProgType
	flags elf.ProgFlag
	// sec, when nonzero, is the section (1-based) whose data the segment
	// maps: offset and address are taken from it, and the size unless
	// filesz is set.
	sec                       int
	off, vaddr, filesz, memsz uint64
}

// Offsets in the ELF64 header.
const (
	ehdrPhoff     = 0x20
	ehdrShoff     = 0x28
	ehdrPhentsize = 0x36
	ehdrPhnum     = 0x38
	ehdrShentsize = 0x3a
	ehdrShnum     = 0x3c
	ehdrShstrndx  = 0x3e
)

// layout is where bytes() put things.
type layout struct {
	dataOff []uint64 // per section (0 is section 1)
	shoff   uint64
}

func (c *craftELF) bytes() []byte {
	b, _ := c.build()
	return b
}

// craftEnc writes the words of one class and byte order.
type craftEnc struct {
	bo      binary.ByteOrder
	class32 bool
}

// addr writes an address-sized word (4 or 8 bytes) at b[off32] or b[off64].
func (e craftEnc) addr(b []byte, off32, off64 int, v uint64) {
	if e.class32 {
		e.bo.PutUint32(b[off32:], uint32(v))
	} else {
		e.bo.PutUint64(b[off64:], v)
	}
}

func (e craftEnc) u32(b []byte, off32, off64 int, v uint32) {
	if e.class32 {
		off64 = off32
	}
	e.bo.PutUint32(b[off64:], v)
}

func (e craftEnc) u16(b []byte, off32, off64 int, v uint16) {
	if e.class32 {
		off64 = off32
	}
	e.bo.PutUint16(b[off64:], v)
}

// sizes are the ELF header's and one program and section header's.
func (e craftEnc) sizes() (ehdr, phent, shent int) {
	if e.class32 {
		return 52, 32, 40
	}
	return 64, 56, 64
}

func (c *craftELF) enc() craftEnc {
	e := craftEnc{bo: binary.LittleEndian, class32: c.class32}
	if c.bigEndian {
		e.bo = binary.BigEndian
	}
	return e
}

func (c *craftELF) build() ([]byte, layout) {
	enc := c.enc()
	ehsize, phent, shent := enc.sizes()
	nprog := len(c.progs) + c.nullProgs
	names := []byte{0}
	nameOff := make([]uint32, len(c.sections))
	for i, s := range c.sections {
		nameOff[i] = uint32(len(names))
		names = append(append(names, s.name...), 0)
	}
	shstrName := uint32(len(names))
	names = append(append(names, ".shstrtab"...), 0)
	for range c.shstrtabPad {
		names = append(names, 'x')
	}
	if c.shstrtabPad > 0 {
		names = append(names, 0)
	}
	b := make([]byte, ehsize+phent*nprog)
	var l layout
	for _, s := range c.sections {
		b = align(b, 16)
		l.dataOff = append(l.dataOff, uint64(len(b)))
		b = append(b, s.data...)
	}
	b = align(b, 16)
	namesOff := uint64(len(b))
	b = append(b, names...)
	b = align(b, 8)
	l.shoff = uint64(len(b))
	nsec := 1 + len(c.sections) + 1 + c.nullSections
	shdrs := make([]byte, shent*nsec)
	for i, s := range c.sections {
		off, size := l.dataOff[i], uint64(len(s.data))
		if s.claimOff != 0 {
			off = s.claimOff
		}
		if s.claimSize != 0 {
			size = s.claimSize
		}
		no := nameOff[i]
		if s.nameOff != 0 {
			no = s.nameOff
		}
		c.putSection(shdrs[shent*(i+1):], no, s.typ, s.flags, s.addr, off, size, s.link)
	}
	c.putSection(shdrs[shent*(len(c.sections)+1):], shstrName, elf.SHT_STRTAB, 0, 0, namesOff, uint64(len(names)), 0)
	b = append(b, shdrs...)
	c.putHeader(b, l.shoff, nprog, nsec)
	for i, p := range c.progs {
		if p.sec > 0 {
			s := c.sections[p.sec-1]
			p.off, p.vaddr = l.dataOff[p.sec-1], s.addr
			if p.filesz == 0 {
				p.filesz = uint64(len(s.data))
			}
			p.memsz = max(p.memsz, p.filesz)
		}
		e := b[ehsize+phent*i:]
		enc.u32(e, 0, 0, uint32(p.typ))
		enc.u32(e, 24, 4, uint32(p.flags))
		enc.addr(e, 4, 8, p.off)
		enc.addr(e, 8, 16, p.vaddr)
		enc.addr(e, 12, 24, p.vaddr)
		enc.addr(e, 16, 32, p.filesz)
		enc.addr(e, 20, 40, p.memsz)
	}
	return b, l
}

func (c *craftELF) putHeader(b []byte, shoff uint64, nprog, nsec int) {
	enc := c.enc()
	ehsize, phent, shent := enc.sizes()
	copy(b, "\x7fELF\x02\x01\x01")
	if c.class32 {
		b[elf.EI_CLASS] = byte(elf.ELFCLASS32)
	}
	if c.bigEndian {
		b[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	enc.u16(b, 16, 16, uint16(elf.ET_EXEC))
	enc.u16(b, 18, 18, uint16(elf.EM_X86_64))
	enc.u32(b, 20, 20, 1)
	enc.addr(b, 28, ehdrPhoff, uint64(ehsize))
	enc.addr(b, 32, ehdrShoff, shoff)
	enc.u16(b, 40, 0x34, uint16(ehsize))
	enc.u16(b, 42, ehdrPhentsize, uint16(phent))
	enc.u16(b, 44, ehdrPhnum, uint16(nprog))
	enc.u16(b, 46, ehdrShentsize, uint16(shent))
	enc.u16(b, 48, ehdrShnum, uint16(nsec))
	enc.u16(b, 50, ehdrShstrndx, uint16(len(c.sections)+1))
}

func (c *craftELF) putSection(e []byte, name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64, link uint32) {
	enc := c.enc()
	enc.u32(e, 0, 0, name)
	enc.u32(e, 4, 4, uint32(typ))
	enc.addr(e, 8, 8, uint64(flags))
	enc.addr(e, 12, 16, addr)
	enc.addr(e, 16, 24, off)
	enc.addr(e, 20, 32, size)
	enc.u32(e, 24, 40, link)
}

func align(b []byte, n int) []byte {
	for len(b)%n != 0 {
		b = append(b, 0)
	}
	return b
}

// goBuildInfoInline is a Go 1.18+ build info blob: the header, then the
// version and the module info (with its sentinels), varint-prefixed.
func goBuildInfoInline(vers, mod string) []byte {
	b := append([]byte("\xff Go buildinf:"), 8, 2)
	b = append(b, make([]byte, buildInfoHeaderSize-len(b))...)
	b = binary.AppendUvarint(b, uint64(len(vers)))
	b = append(b, vers...)
	b = binary.AppendUvarint(b, uint64(len(mod)))
	return append(b, mod...)
}

// goModInfo wraps module info in the 16-byte sentinels the linker puts
// around it.
func goModInfo(s string) string {
	const sentinel = "0123456789abcdef"
	return sentinel + s + "\n" + sentinel
}

// goBuildInfoPointers is a Go 1.17-and-older blob at address addr: the
// header points to two string headers, which point to the strings.
func goBuildInfoPointers(addr uint64, vers, mod string, versLen, modLen uint64) []byte {
	le := binary.LittleEndian
	b := append([]byte("\xff Go buildinf:"), 8, 0)
	b = le.AppendUint64(b, addr+32)
	b = le.AppendUint64(b, addr+48)
	b = le.AppendUint64(b, addr+64)
	b = le.AppendUint64(b, versLen)
	b = le.AppendUint64(b, addr+64+uint64(len(vers)))
	b = le.AppendUint64(b, modLen)
	return append(append(b, vers...), mod...)
}

// craftGo is a Go-like program: a .go.buildinfo section holding blob, in a
// writable PT_LOAD segment.
func craftGo(blob []byte) *craftELF {
	return &craftELF{
		sections: []craftSec{{name: ".go.buildinfo", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_WRITE, addr: 0x500000, data: blob}},
		progs:    []craftProg{{typ: elf.PT_LOAD, flags: elf.PF_R | elf.PF_W, sec: 1}},
	}
}

// craftDynamic is a dynamic glibc program that needs the libraries named
// by needed: .interp, .dynstr and .dynamic.
func craftDynamic(needed ...string) *craftELF { return craftDynamicAs(&craftELF{}, needed...) }

// craftDynamicAs is craftDynamic in c's class and byte order.
func craftDynamicAs(c *craftELF, needed ...string) *craftELF {
	enc := c.enc()
	ent := 16
	if c.class32 {
		ent = 8
	}
	str := []byte{0}
	var dyn []byte
	for _, n := range needed {
		e := make([]byte, ent)
		enc.addr(e, 0, 0, uint64(elf.DT_NEEDED))
		enc.addr(e, 4, 8, uint64(len(str)))
		dyn = append(dyn, e...)
		str = append(append(str, n...), 0)
	}
	dyn = append(dyn, make([]byte, ent)...) // DT_NULL
	c.sections = []craftSec{
		{name: ".interp", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: []byte("/lib/ld-linux.so.2\x00")},
		{name: ".dynstr", typ: elf.SHT_STRTAB, flags: elf.SHF_ALLOC, data: str},
		{name: ".dynamic", typ: elf.SHT_DYNAMIC, flags: elf.SHF_ALLOC | elf.SHF_WRITE, link: 2, data: dyn},
		{name: ".rodata", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: []byte("hello\x00")},
	}
	c.progs = []craftProg{{typ: elf.PT_INTERP, flags: elf.PF_R, sec: 1}}
	return c
}
