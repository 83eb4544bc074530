package netdiag

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a process holding a socket.
type Proc struct {
	PID  int
	Comm string // /proc/PID/comm, e.g. "python3"
}

// Holders maps socket inodes to the processes that hold them, by reading
// /proc/PID/fd/* links "socket:[INODE]". The keys of inodes whose value is
// true are looked for (inode 0, as for TIME_WAIT, is never held).
//
// It scans processes in the netns first (their /proc/PID/ns/net inode equals
// n.Inode()), then, only if some inodes are still unresolved, the other
// processes, until every inode has a holder (a socket passed to a process in
// another netns, or created there through setns, is still a socket of this
// netns). It stops after the time budget (e.g. 300ms; budget <= 0 means no
// limit) and returns what it found. Processes that vanish during the scan, or
// cannot be inspected, are skipped silently. A process is listed once per
// inode however many of its fds refer to it; the processes of each inode are
// in scan order.
func (n *Netns) Holders(inodes map[uint64]bool, budget time.Duration) map[uint64][]Proc {
	h := holderScan{want: inodes, found: make(map[uint64][]Proc)}
	if budget > 0 {
		h.deadline = time.Now().Add(budget)
	}
	for ino, ok := range inodes {
		if ok && ino != 0 {
			h.pending++
		}
	}
	if h.pending == 0 {
		return h.found
	}
	pids, err := listPIDs()
	if err != nil {
		return h.found
	}
	self := nsLink(n.inode)
	var others []int
	for i, pid := range pids {
		if i%64 == 0 && h.expired() {
			return h.found
		}
		link, err := os.Readlink(procPath(pid, "ns/net"))
		if err != nil {
			continue // gone, or a kernel thread we may not inspect
		}
		if link != self {
			others = append(others, pid)
			continue
		}
		h.scan(pid)
	}
	for _, pid := range others {
		if h.pending == 0 || h.expired() {
			break
		}
		h.scan(pid)
	}
	return h.found
}

// holderScan is the state of one Holders call.
type holderScan struct {
	want     map[uint64]bool
	found    map[uint64][]Proc
	pending  int       // wanted inodes without a holder yet
	deadline time.Time // zero: no limit
	buf      [64]byte  // readlink buffer; "socket:[4294967295]" fits
	matched  []uint64  // inodes matched by the current process
}

func (h *holderScan) expired() bool {
	return !h.deadline.IsZero() && time.Now().After(h.deadline)
}

// scan reads the fd links of one process and records it for every wanted
// socket inode it holds.
func (h *holderScan) scan(pid int) {
	dir, err := os.Open(procPath(pid, "fd"))
	if err != nil {
		return
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return
	}
	dfd := int(dir.Fd())
	h.matched = h.matched[:0]
	for i, name := range names {
		if i%256 == 255 && h.expired() {
			break
		}
		nb, err := unix.Readlinkat(dfd, name, h.buf[:])
		if err != nil {
			continue
		}
		link := h.buf[:nb]
		const pre = "socket:["
		if len(link) < len(pre)+2 || string(link[:len(pre)]) != pre || link[len(link)-1] != ']' {
			continue
		}
		ino, err := strconv.ParseUint(string(link[len(pre):len(link)-1]), 10, 64)
		if err != nil || !h.want[ino] {
			continue
		}
		dup := false
		for _, m := range h.matched {
			if m == ino {
				dup = true
				break
			}
		}
		if !dup {
			h.matched = append(h.matched, ino)
		}
	}
	if len(h.matched) == 0 {
		return
	}
	comm, err := os.ReadFile(procPath(pid, "comm"))
	if err != nil {
		return // exited meanwhile
	}
	p := Proc{PID: pid, Comm: strings.TrimSuffix(string(comm), "\n")}
	for _, ino := range h.matched {
		if len(h.found[ino]) == 0 {
			h.pending--
		}
		h.found[ino] = append(h.found[ino], p)
	}
}
