package explain

import (
	"bufio"
	"os"
	"testing"
)

// FuzzIdentify: any pasted text is either recognised with a sane errno or
// not, and never panics. Seeds: testdata/fuzz/identify.txt.
func FuzzIdentify(f *testing.F) {
	if fh, err := os.Open("../testdata/fuzz/identify.txt"); err == nil {
		s := bufio.NewScanner(fh)
		for s.Scan() {
			f.Add(s.Text())
		}
		fh.Close()
	}
	c, err := loadCatalog()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		// What `eaddr explain` hands on: at most 4 KiB (longer inputs only
		// make a worker miss the fuzz deadline, which go test reports as a failure).
		if len(in) > 4096 {
			in = in[:4096]
		}
		for _, id := range c.Identify(in) {
			if id.Errno < 0 || id.Errno > 255 {
				t.Fatalf("%q: errno %d", in, id.Errno)
			}
		}
		c.Closest(in, 3)
		r := c.ReadText(in, len(in)%2 == 0) // cut or not: the address at the cut is dropped by offset
		if r.Line > 0 && (r.Line > len(in) || len(r.IDs) == 0) {
			t.Fatalf("%q: line %d of %d, %d readings", in, r.Line, r.Lines, len(r.IDs))
		}
	})
}

// FuzzAnalyzeBinary: whatever a file in a container holds, the analysis of
// it stays within maxBinaryRead bytes read and maxBinaryAlloc bytes
// allocated, never panics, returns a sane BinaryInfo or an error (not ELF,
// not analysed, a truncated read), and agrees with the unbounded analysis
// it replaced (debug/elf, debug/buildinfo) wherever that one can be run
// safely. Seeds: real programs whole and cut (binRealSeeds), files crafted
// to claim too much (binHostileSeeds), crashers in testdata/fuzz/.
func FuzzAnalyzeBinary(f *testing.F) {
	for _, data := range binRealSeeds(f, binFuzzSeedLimit) {
		f.Add(data)
	}
	for _, data := range binHostileSeeds() {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAnalysis(t, data)
	})
}
