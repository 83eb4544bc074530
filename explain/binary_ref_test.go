package explain

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// refAnalyze is analyzeBinaryFile as it was before the bounded reader:
// debug/elf, debug/buildinfo and DynString, unbounded. The tests compare
// the bounded analysis with it wherever the bounds do not apply: the same
// answers, the same files rejected. It must only be given files whose
// claims are small (refSafe): that is what it cannot survive otherwise.
func refAnalyze(r io.ReaderAt, size int64, name string) (info BinaryInfo, panicked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked, err = true, fmt.Errorf("debug/elf panicked: %v", p)
		}
	}()
	info = BinaryInfo{Name: name}
	var magic [4]byte
	if n, _ := r.ReadAt(magic[:], 0); n < len(magic) || string(magic[:]) != elf.ELFMAG {
		return info, false, errNotELF
	}
	ef, err := elf.NewFile(r)
	if err != nil {
		return info, false, fmt.Errorf("%w: %v", errNotELF, err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			buf := make([]byte, min(p.Filesz, maxInterpLen))
			if _, err := io.ReadFull(p.Open(), buf); err != nil {
				return info, false, err
			}
			if i := bytes.IndexByte(buf, 0); i >= 0 {
				buf = buf[:i]
			}
			info.Interp = string(buf)
			break
		}
	}
	info.Static = !refHasInterp(ef)
	if refMayBeGo(ef) {
		if bi, err := buildinfo.Read(r); err == nil {
			info.Runtime, info.Libc = runtimeGo, libcGo
			info.GoVersion, info.GoPath = bi.GoVersion, bi.Path
			return info, false, nil
		}
	}
	needles := [][]byte{busyBoxMarker}
	if info.Static {
		needles = append(needles, glibcEADDRNOTAVAIL, muslEADDRNOTAVAIL)
	}
	if needed, err := ef.DynString(elf.DT_NEEDED); err == nil {
		info.Needed = needed[:min(len(needed), maxNeeded)]
	}
	var spans []fileSpan
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOBITS && (s.Name == ".rodata" || strings.HasPrefix(s.Name, ".rodata.")) {
			spans = append(spans, fileSpan{int64(s.Offset), int64(s.Size)})
		}
	}
	if len(spans) == 0 {
		spans = []fileSpan{{0, size}}
	}
	found, err := scanSpans(r, spans, needles, maxScanBytes)
	if err != nil {
		return info, false, err
	}
	classify(&info, found)
	return info, false, nil
}

func refHasInterp(ef *elf.File) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

func refMayBeGo(ef *elf.File) bool {
	if len(ef.Sections) == 0 {
		return true
	}
	for _, s := range ef.Sections {
		switch s.Name {
		case ".go.buildinfo", ".note.go.buildid", ".gopclntab":
			return true
		}
	}
	return false
}

// refSafe reports whether refAnalyze can be run on data, a file the bounded
// analysis parsed as ef without giving up: the copies debug/elf makes
// (every section name, every DT_NEEDED name, out of their tables) stay
// small, and no section is one debug/elf would inflate (the bounded
// analysis does not; that is a difference by design).
func refSafe(ef *elfFile, data []byte) bool {
	const budget = 64 << 20
	var copied int
	for i := range ef.sections {
		s := &ef.sections[i]
		if s.compressedOrZlib {
			return false
		}
		if ef.names != nil {
			copied += bytes.IndexByte(ef.names[s.name:], 0)
		}
	}
	if copied > budget {
		return false
	}
	ds := ef.sectionByType(elf.SHT_DYNAMIC)
	if ds == nil || ds.link == 0 || int(ds.link) >= len(ef.sections) || !ef.inFile(ds.off, ds.size) {
		return true
	}
	str := &ef.sections[ds.link]
	if str.compressedOrZlib || !ef.inFile(str.off, str.size) || str.typ == elf.SHT_NOBITS {
		return true
	}
	dyn, tab := data[ds.off:ds.off+ds.size], data[str.off:str.off+str.size]
	for len(dyn) >= 16 {
		tag, v := binary.LittleEndian.Uint64(dyn), binary.LittleEndian.Uint64(dyn[8:])
		if !ef.class64 || ef.bo != binary.LittleEndian {
			return len(tab)*len(dyn) < budget // the rough bound will do
		}
		if tag == uint64(elf.DT_NEEDED) && v < uint64(len(tab)) {
			copied += max(0, bytes.IndexByte(tab[v:], 0))
		}
		dyn = dyn[16:]
	}
	return copied <= budget
}

// sameAnalysis compares the bounded analysis with the reference on one
// file: "" when they agree, else what differs.
func sameAnalysis(got BinaryInfo, gotErr error, want BinaryInfo, refPanicked bool, wantErr error) string {
	switch {
	case refPanicked:
		if !errors.Is(gotErr, errNotELF) {
			return fmt.Sprintf("debug/elf panics (%v) but the analysis returned %+v, %v; want errNotELF", wantErr, got, gotErr)
		}
		return ""
	case (gotErr == nil) != (wantErr == nil), errors.Is(gotErr, errNotELF) != errors.Is(wantErr, errNotELF):
		return fmt.Sprintf("error %v, the reference's %v", gotErr, wantErr)
	case gotErr != nil:
		return ""
	}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		return fmt.Sprintf("got %+v\nthe reference %+v", got, want)
	}
	return ""
}
