package netdiag

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"sync"
)

// Kallsyms names the kernel function an address is in, from /proc/kallsyms
// (which shows addresses to root; with kptr_restrict=2 or without
// CAP_SYSLOG every address is 0, and nothing is named). It keeps the sorted
// start addresses of the text symbols (8 bytes each) and the names of those
// asked for, found by reading the file again: it is asked about the few
// functions that free dropped packets.
type Kallsyms struct {
	Path   string // /proc/kallsyms unless set
	once   sync.Once
	mu     sync.Mutex
	starts []uint64
	names  map[uint64]string
	err    error
}

// Load reads the text symbols' addresses now; Func does at its first call
// otherwise. Safe beside Func.
func (k *Kallsyms) Load() { k.once.Do(k.load) }

// Func is the name of the function addr is in; "" when not known.
func (k *Kallsyms) Func(addr uint64) string {
	k.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil || addr == 0 {
		return ""
	}
	i, found := slices.BinarySearch(k.starts, addr)
	if !found {
		if i == 0 {
			return ""
		}
		i--
	}
	start := k.starts[i]
	if n, ok := k.names[start]; ok {
		return n
	}
	if len(k.names) >= 1024 {
		clear(k.names)
	}
	n := k.scan(func(a uint64) bool { return a == start })
	k.names[start] = n
	return n
}

func (k *Kallsyms) path() string {
	if k.Path != "" {
		return k.Path
	}
	return "/proc/kallsyms"
}

func (k *Kallsyms) load() {
	k.names = map[uint64]string{}
	k.scan(func(a uint64) bool {
		k.starts = append(k.starts, a)
		return false
	})
	if len(k.starts) == 0 && k.err == nil {
		k.err = os.ErrPermission // every address 0: hidden from this process
	}
	slices.Sort(k.starts)
	k.starts = slices.Compact(k.starts)
}

// scan calls want with each text symbol's address (t, T); the first name
// it wants is returned.
func (k *Kallsyms) scan(want func(uint64) bool) string {
	f, err := os.Open(k.path())
	if err != nil {
		k.err = err
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ffffffff81000000 T _stext", maybe "\t[module]" after the name
		f := bytes.Fields(sc.Bytes())
		if len(f) < 3 || (f[1][0] != 't' && f[1][0] != 'T') {
			continue
		}
		a, err := strconv.ParseUint(string(f[0]), 16, 64)
		if err != nil || a == 0 {
			continue
		}
		if want(a) {
			return string(f[2])
		}
	}
	return ""
}
