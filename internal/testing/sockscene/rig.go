package sockscene

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// waitLimit bounds every wait for a condition the scene makes happen (a
// socket reaching a state): generous, so a loaded machine still gets there;
// it is there only so a broken scene fails instead of hanging.
const waitLimit = 60 * time.Second

// rig is the netns of one scene and everything made in it: the test's own
// file descriptors, the holder processes, the programs it runs.
type rig struct {
	t     testing.TB
	name  string
	ns    *netns.NS
	ss    string // path of ss
	ip    string // path of ip
	sleep string // path of sleep

	mu      sync.Mutex
	fds     map[int]bool // sockets the test process still holds
	holders []*exec.Cmd
	ports   []int  // relevant ports besides ip_local_port_range
	stale   string // why the scene's precondition did not hold, "" if it did
	once    sync.Once
}

// newRig makes a netns for the scene name and registers its cleanup.
func newRig(t testing.TB, name string) *rig {
	t.Helper()
	testenv.RequireRoot(t)
	r := &rig{t: t, name: name, fds: map[int]bool{}}
	r.ss = testenv.Program(t, "ss", "iproute2")
	r.ip = testenv.Program(t, "ip", "iproute2")
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sockscene %s: sleep, the holders' program: %v", name, err)
	}
	r.sleep = p
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("sockscene %s: %v", name, err)
	}
	r.ns = ns
	t.Cleanup(r.cleanup)
	return r
}

// fatalf fails the test with the scene's name.
func (r *rig) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("sockscene %s: %s", r.name, fmt.Sprintf(format, args...))
}

// must fails the test when err is not nil.
func (r *rig) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.fatalf("%s: %v", what, err)
	}
}

// run runs a program inside the netns and returns its standard output.
func (r *rig) run(prog string, args ...string) (string, error) {
	cmd := exec.Command(prog, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := r.ns.Start(cmd); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "),
			err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// ipCmd runs `ip args...` inside the netns and fails the test on error.
func (r *rig) ipCmd(args ...string) string {
	r.t.Helper()
	out, err := r.run(r.ip, args...)
	r.must(err, "ip")
	return out
}

// sysctl sets a net.* sysctl inside the netns.
func (r *rig) sysctl(name, value string) {
	r.t.Helper()
	r.must(r.ns.SetSysctl(name, value), "sysctl")
}

// setRange sets ip_local_port_range to lo..hi.
func (r *rig) setRange(lo, hi int) {
	r.t.Helper()
	r.sysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi))
}

// waitFor polls cond until it holds, and fails the test after waitLimit.
func (r *rig) waitFor(what string, cond func() (bool, error)) {
	r.t.Helper()
	r.waitForSaying(what, cond, nil)
}

// waitForSaying is waitFor whose failure also says seen(): what was seen
// last, read once, when the wait has failed.
func (r *rig) waitForSaying(what string, cond func() (bool, error), seen func() string) {
	r.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, err := cond()
		r.must(err, what)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if seen != nil {
				r.fatalf("%s: not reached after %v; %s", what, waitLimit, seen())
			}
			r.fatalf("%s: not reached after %v", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cleanup closes the test's sockets, kills the holders, waits until only
// TIME_WAIT sockets are left in the netns and closes it. It runs once.
func (r *rig) cleanup() {
	r.once.Do(func() {
		r.mu.Lock()
		for fd := range r.fds {
			unix.Close(fd)
		}
		r.fds = map[int]bool{}
		holders := r.holders
		r.holders = nil
		r.mu.Unlock()
		for _, cmd := range holders {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if err := r.drain(); err != nil {
			r.t.Errorf("sockscene %s: cleanup: %v", r.name, err)
		}
		r.ns.Close()
	})
}

// drain waits until the netns holds no socket but TIME_WAIT ones: an
// orphan (FIN_WAIT*, LAST_ACK) would keep the netns alive after Close.
func (r *rig) drain() error {
	deadline := time.Now().Add(waitLimit)
	for {
		var left []string
		for _, args := range [][]string{{"-tan"}, {"-uan"}} {
			out, err := r.run(r.ss, args...)
			if err != nil {
				return err
			}
			for _, s := range parseSS(out) {
				if s.State != "TIME-WAIT" {
					left = append(left, s.State+" "+s.Local+" "+s.Peer)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sockets still in the netns after %v: %v", waitLimit, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
