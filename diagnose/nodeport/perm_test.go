package nodeport

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// TestReadWithoutNetAdmin: without CAP_NET_ADMIN no netlink source can be
// read: each says why (EPERM) and Read fails instead of handing on an empty
// table that would read as "no NodePort rule".
func TestReadWithoutNetAdmin(t *testing.T) {
	testenv.RequireRoot(t)
	type result struct {
		tab *Table
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Capabilities are per thread: drop CAP_NET_ADMIN from this one
		// only, and never unlock it, so Go ends the thread with the
		// goroutine instead of reusing it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			ch <- result{err: err}
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			ch <- result{err: err}
			return
		}
		tab, err := Read()
		ch <- result{tab, err}
	}()
	r := <-ch
	if r.err == nil {
		t.Fatalf("Read without CAP_NET_ADMIN: %s, want an error", r.tab)
	}
	t.Logf("Read without CAP_NET_ADMIN: %v", r.err)
	msg := r.err.Error()
	if !errors.Is(r.err, unix.EPERM) || !strings.Contains(msg, "nftables: ") || !strings.Contains(msg, "iptables: ") {
		t.Errorf("error %q, want EPERM named for the nftables and iptables sources", msg)
	}
}
