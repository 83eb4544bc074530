package sockscene

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// leftovers is what a scene made that its cleanup must take away.
type leftovers struct {
	holders map[int]string // pid -> start time
	inode   uint64         // of the scene's netns
	cookie  uint64         // tells it from a later netns with the same inode
}

// record notes the scene's processes and netns while they are alive.
func record(t *testing.T, s *Scene) leftovers {
	t.Helper()
	l := leftovers{holders: map[int]string{}, inode: s.NS.Inode()}
	for _, h := range s.Holders {
		l.holders[h.PID] = h.StartTime
	}
	c, err := s.NS.Cookie()
	if err != nil {
		t.Fatalf("netns cookie: %v", err)
	}
	l.cookie = c
	return l
}

// checkGone checks that the holders are dead (and reaped) and that no
// process still refers to the netns, through its ns link or an fd.
func checkGone(t *testing.T, l leftovers) {
	t.Helper()
	for pid, start := range l.holders {
		if st, err := StartTime(pid); err == nil && st == start {
			t.Errorf("holder %d still exists after cleanup", pid)
		}
	}
	link := fmt.Sprintf("net:[%d]", l.inode)
	var refs []string
	for _, glob := range []string{"/proc/[0-9]*/ns/net", "/proc/[0-9]*/task/[0-9]*/ns/net", "/proc/[0-9]*/fd/*"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if target, err := os.Readlink(p); err == nil && target == link && sameNetns(p, l.cookie) {
				refs = append(refs, p)
			}
		}
	}
	if len(refs) > 0 {
		t.Errorf("the scene's netns %s is still referred to by %v", link, refs)
	}
}

// sameNetns says whether the netns at path is the scene's (same cookie):
// a later netns may have got the freed inode. One that cannot be opened
// any more counts as the scene's, to be safe.
func sameNetns(path string, cookie uint64) bool {
	ns, err := netns.Open(path)
	if err != nil {
		return true
	}
	defer ns.Close()
	c, err := ns.Cookie()
	return err != nil || c == cookie
}

// children are the processes whose parent is the test process: a twin's
// holders are not in the Scene, this finds them too.
func children(t *testing.T) []int {
	t.Helper()
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// socketInodes are the inodes of the sockets process pid has open, sorted.
func socketInodes(t *testing.T, pid int) []uint64 {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("%s: %v", dir, err)
		return nil
	}
	var inodes []uint64
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.Trim(target[len("socket:"):], "[]"), 10, 64)
		if err == nil {
			inodes = append(inodes, ino)
		}
	}
	slices.Sort(inodes)
	return inodes
}

// socketFDs counts the sockets the test process has open.
func socketFDs(t *testing.T) int {
	t.Helper()
	return len(socketInodes(t, os.Getpid()))
}
