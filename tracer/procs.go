//go:build linux

package tracer

import (
	"errors"

	"github.com/cilium/ebpf"
)

// procKey names a process and the program it runs (bpf/eaddr.h struct
// proc_key); procFacts is what identifies that program.
type (
	procKey   = eaddrProcKey
	procFacts = eaddrProcFacts
)

// procCache keeps the program identity of the processes that failed, so
// that the events the kernel sends without it (FlagProcSent: an earlier
// event of the process carried it) can be completed on Read, also after the
// process is gone. Two generations of at most max entries; on a miss, the
// kernel's own LRU map is asked. Not safe for concurrent use.
type procCache struct {
	cur, old  map[procKey]procFacts
	max       int
	kernel    func(*procKey, *procFacts) bool // nil: not asked
	forgotten uint64                          // events left without their program's identity
	filled    uint64                          // events completed from what was kept
	k         procKey                         // kernel's arguments: fields, so they do not escape per call
	f         procFacts
}

// procsKept is the size of a generation of procCache: 4,096 to 8,192
// processes are kept (about 1 MiB), the kernel's procs map has the last
// 8,192 for the rest.
const procsKept = 4096

func newProcCache(max int, kernel func(*procKey, *procFacts) bool) *procCache {
	return &procCache{cur: make(map[procKey]procFacts), max: max, kernel: kernel}
}

// fill completes ev when the kernel left its program identity out, and
// remembers it when the kernel put it in. An event it cannot complete keeps
// FlagProcSent with empty fields, and is counted.
func (c *procCache) fill(ev *RawEvent) {
	k := procKey{Tgid: ev.Tgid, StartBoottime: ev.StartBoottime, ExecId: ev.ExecId}
	if ev.Flags&FlagProcSent == 0 {
		c.put(k, procFacts{ExeIno: ev.ExeIno, ExeDev: ev.ExeDev, ArgsLen: ev.ArgsLen, ExeName: ev.ExeName, Args: ev.Args})
		return
	}
	f, ok := c.cur[k]
	if !ok {
		if f, ok = c.old[k]; ok {
			c.put(k, f)
		} else if c.k = k; c.kernel != nil && c.kernel(&c.k, &c.f) {
			f, ok = c.f, true
			c.put(k, f)
		}
	}
	if !ok {
		c.forgotten++
		return
	}
	ev.ExeIno, ev.ExeDev, ev.ArgsLen, ev.ExeName, ev.Args = f.ExeIno, f.ExeDev, f.ArgsLen, f.ExeName, f.Args
	ev.Flags &^= FlagProcSent
	c.filled++
}

func (c *procCache) put(k procKey, f procFacts) {
	if len(c.cur) >= c.max {
		c.old, c.cur = c.cur, make(map[procKey]procFacts)
	}
	c.cur[k] = f
}

func (c *procCache) len() int { return len(c.cur) + len(c.old) }

// lookupProc asks the kernel's procs map.
func (t *Tracer) lookupProc(k *procKey, f *procFacts) bool {
	err := t.objs.Procs.Lookup(k, f)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.log.Debug("looking up a process's program identity", "err", err)
	}
	return err == nil
}
