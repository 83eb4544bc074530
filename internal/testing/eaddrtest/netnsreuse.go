package eaddrtest

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/netns"
	"golang.org/x/sys/unix"
)

// ReuseInode returns a new netns that has inode, the number of a netns the
// caller freed. Every kind of namespace takes its number from one kernel
// allocator (proc_inum_ida, lowest free first). A netns gives its number
// back only when its deferred teardown (cleanup_net) has run, which is slow
// under emulation; a UTS namespace gives its number back as soon as its
// last reference goes. So the lowest free number is read by making a UTS
// namespace, not a netns (the CI's 6.1 guest once held 1,855 namespaces
// made that way, and the teardown did not come within 2 minutes): numbers
// below inode are filled with held UTS namespaces, and the netns is made
// once inode is the lowest free one.
func ReuseInode(t *testing.T, inode uint64) *netns.NS {
	t.Helper()
	var held []int // UTS namespaces holding free numbers below inode
	defer func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	}()
	// Not a bound on the kernel's speed: a guard against waiting forever on a
	// teardown that never comes (a leaked reference), with a message saying so.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		fd, lowest, err := UtsNS()
		if err != nil {
			t.Fatal(err)
		}
		if lowest < inode {
			held = append(held, fd)
			continue
		}
		unix.Close(fd)
		if lowest == inode {
			n, err := netns.New()
			if err != nil {
				t.Fatal(err)
			}
			if n.Inode() == inode {
				t.Cleanup(func() { n.Close() })
				return n
			}
			n.Close() // another namespace took the number first: look again
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel has not freed netns inode %d after 5 minutes (lowest free number %d, %d below it held): its teardown is stuck", inode, lowest, len(held))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// UtsNS makes a UTS namespace and returns an fd that holds it, with its
// inode. It runs on a locked thread of its own, which goes back to its
// original UTS namespace (or, if it cannot, ends with its goroutine).
func UtsNS() (fd int, inode uint64, err error) {
	type result struct {
		fd    int
		inode uint64
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		r := result{fd: -1, err: fmt.Errorf("utsNS: thread ended early")}
		defer func() { ch <- r }()
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			r.err = err
			return
		}
		defer unix.Close(orig)
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("unshare(CLONE_NEWUTS): %w", err)
			return
		}
		r.fd, r.err = unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if r.err == nil {
			var st unix.Stat_t
			if r.err = unix.Fstat(r.fd, &st); r.err == nil {
				r.inode = st.Ino
			}
		}
		if err := unix.Setns(orig, unix.CLONE_NEWUTS); err != nil {
			r.err = fmt.Errorf("setns back to the original UTS namespace: %w", err)
			return // the thread stays locked and ends with the goroutine
		}
		runtime.UnlockOSThread()
	}()
	r := <-ch
	if r.err != nil && r.fd >= 0 {
		unix.Close(r.fd)
	}
	return r.fd, r.inode, r.err
}
