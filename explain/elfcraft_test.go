package explain

import (
	"debug/elf"
	"encoding/binary"
)

// craftELF lays out a little-endian ELF64 executable for the bound tests and
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

func (c *craftELF) build() ([]byte, layout) {
	le := binary.LittleEndian
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
	b := make([]byte, 64+56*nprog)
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
	shdrs := make([]byte, 64*nsec)
	for i, s := range c.sections {
		e := shdrs[64*(i+1):]
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
		le.PutUint32(e, no)
		le.PutUint32(e[4:], uint32(s.typ))
		le.PutUint64(e[8:], uint64(s.flags))
		le.PutUint64(e[16:], s.addr)
		le.PutUint64(e[24:], off)
		le.PutUint64(e[32:], size)
		le.PutUint32(e[40:], s.link)
	}
	e := shdrs[64*(len(c.sections)+1):]
	le.PutUint32(e, shstrName)
	le.PutUint32(e[4:], uint32(elf.SHT_STRTAB))
	le.PutUint64(e[24:], namesOff)
	le.PutUint64(e[32:], uint64(len(names)))
	b = append(b, shdrs...)

	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[ehdrPhoff:], 64)
	le.PutUint64(b[ehdrShoff:], l.shoff)
	le.PutUint16(b[0x34:], 64)
	le.PutUint16(b[ehdrPhentsize:], 56)
	le.PutUint16(b[ehdrPhnum:], uint16(nprog))
	le.PutUint16(b[ehdrShentsize:], 64)
	le.PutUint16(b[ehdrShnum:], uint16(nsec))
	le.PutUint16(b[ehdrShstrndx:], uint16(len(c.sections)+1))
	for i, p := range c.progs {
		e := b[64+56*i:]
		if p.sec > 0 {
			s := c.sections[p.sec-1]
			p.off, p.vaddr = l.dataOff[p.sec-1], s.addr
			if p.filesz == 0 {
				p.filesz = uint64(len(s.data))
			}
			p.memsz = max(p.memsz, p.filesz)
		}
		le.PutUint32(e, uint32(p.typ))
		le.PutUint32(e[4:], uint32(p.flags))
		le.PutUint64(e[8:], p.off)
		le.PutUint64(e[16:], p.vaddr)
		le.PutUint64(e[24:], p.vaddr)
		le.PutUint64(e[32:], p.filesz)
		le.PutUint64(e[40:], p.memsz)
	}
	return b, l
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
func craftDynamic(needed ...string) *craftELF {
	str := []byte{0}
	var dyn []byte
	for _, n := range needed {
		dyn = binary.LittleEndian.AppendUint64(dyn, uint64(elf.DT_NEEDED))
		dyn = binary.LittleEndian.AppendUint64(dyn, uint64(len(str)))
		str = append(append(str, n...), 0)
	}
	dyn = append(dyn, make([]byte, 16)...) // DT_NULL
	return &craftELF{
		sections: []craftSec{
			{name: ".interp", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: []byte("/lib64/ld-linux-x86-64.so.2\x00")},
			{name: ".dynstr", typ: elf.SHT_STRTAB, flags: elf.SHF_ALLOC, data: str},
			{name: ".dynamic", typ: elf.SHT_DYNAMIC, flags: elf.SHF_ALLOC | elf.SHF_WRITE, link: 2, data: dyn},
			{name: ".rodata", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, data: []byte("hello\x00")},
		},
		progs: []craftProg{{typ: elf.PT_INTERP, flags: elf.PF_R, sec: 1}},
	}
}
