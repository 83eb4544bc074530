//go:build linux

package tracer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// failScript moves the python process into the cgroup argv[1], then fails
// bind() argv[2] times with EADDRNOTAVAIL: toward a new address each time
// in 198.18.0.0/15 (RFC 2544, on no interface), or toward 198.19.255.255
// each time and then once toward 198.19.255.254 ("same+1").
const failScript = `import os, socket, sys
open(sys.argv[1] + "/cgroup.procs", "w").write(str(os.getpid()))
n, same = int(sys.argv[2]), sys.argv[3] == "same+1"
addrs = ["198.19.255.255"] * n + ["198.19.255.254"] if same else ("198.%d.%d.%d" % (18 + (i >> 16), (i >> 8) & 255, i & 255) for i in range(n))
for a in addrs:
    s = socket.socket()
    try:
        s.bind((a, 4242))
        sys.exit("bind to %s succeeded" % a)
    except OSError as e:
        if e.errno != 99:
            raise
    s.close()
`

// cgroupFailer runs failScript in a netns of its own, each run in a cgroup
// of its own.
type cgroupFailer struct {
	t      *testing.T
	ns     *netns.NS
	python string
	root   string
}

func newCgroupFailer(t *testing.T) *cgroupFailer {
	ns := testns.New(t)
	root := filepath.Join(cgroup2Root(t), fmt.Sprintf("eaddr-test-%d-%s", os.Getpid(), filepath.Base(t.Name())))
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(root) })
	return &cgroupFailer{t: t, ns: ns, python: testenv.Program(t, "python3", "python3"), root: root}
}

// fail runs failScript with n and mode in a new cgroup named name and
// returns its pid and the cgroup's id; it has exited when fail returns.
func (f *cgroupFailer) fail(name string, n int, mode string) (pid int, cgroup uint64) {
	t := f.t
	t.Helper()
	dir := filepath.Join(f.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.python, "-c", failScript, dir, strconv.Itoa(n), mode)
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := f.ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	return cmd.Process.Pid, st.Ino
}

// The cgroup's bucket (Options.CgroupRate): a cgroup that fails toward
// 3,000 addresses, each a new key with a full bucket, sends no more than
// its cgroup's budget into the ring, so that another cgroup's one failure
// after it is not lost, though the ring holds one page (ten events) and
// nothing reads it until both are done: without the cgroup's bucket, the
// flood's first ten fill it and the rest is lost, the other cgroup's
// failure with it. The flood makes one key (the others were held back
// before a key was made for them), and the cgroup bucket's count is exact.
func TestRateLimitCgroup(t *testing.T) {
	const n = 3000
	f := newCgroupFailer(t)
	tr := newTracer(t, Options{NetNS: uint32(f.ns.Inode()), Rate: 100, CgroupRate: 1.0 / 3600, RingSize: os.Getpagesize()})
	flood, floodCg := f.fail("flood", n, "many")
	quiet, _ := f.fail("quiet", 1, "many")
	evs := readAll(t, tr)
	byPID := map[int]int{}
	for _, ev := range evs {
		byPID[int(ev.Tgid)]++
	}
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	states := map[CgroupLimitKey]uint64{}
	total, err := tr.CgroupLimitStates(func(k CgroupLimitKey, held uint64) { states[k] = held })
	if err != nil {
		t.Fatal(err)
	}
	suppressed, keys, err := tr.LimitCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failures toward as many addresses, then 1 of another cgroup: %d events (%v by pid), %d lost, held back %d by the cgroup's bucket (%v), %d by keys' buckets, %d keys made",
		n, len(evs), byPID, st.KernelLost, total, states, suppressed, keys)
	if byPID[quiet] != 1 || st.KernelLost != 0 {
		t.Errorf("the other cgroup's failure: %d events, %d lost; want its event and nothing lost", byPID[quiet], st.KernelLost)
	}
	want := CgroupLimitKey{CgroupId: floodCg, Err: uint16(unix.EADDRNOTAVAIL), Syscall: SysBind}
	if byPID[flood] != 1 || total != n-1 || states[want] != n-1 || len(states) != 1 {
		t.Errorf("the flood: %d events, %d held back by cgroup buckets %v; want 1 (the cgroup's burst) and %d, all in %+v", byPID[flood], total, states, n-1, want)
	}
	if suppressed != 0 || keys != 2 {
		t.Errorf("%d held back by keys, %d keys made; want 0 and 2 (the flood's first, the other's)", suppressed, keys)
	}
}

// A storm toward one address that its key's bucket holds back spends none
// of its cgroup's budget: the key decides first, so the same process's
// failure toward another address right after it passes. The cgroup's
// bucket holds two (2/s), the key's one (one an hour). Were the cgroup's
// bucket asked first, the storm would spend both within the storm's first
// failures, and the other address's would be held back unless the storm's
// 200 failures took longer than the half second of a refill.
func TestRateLimitCgroupAfterKey(t *testing.T) {
	const n = 200
	f := newCgroupFailer(t)
	tr := newTracer(t, Options{NetNS: uint32(f.ns.Inode()), Rate: 1.0 / 3600, CgroupRate: 2, RingSize: 1 << 20})
	f.fail("storm", n, "same+1")
	evs := readAll(t, tr)
	byAddr := map[[4]uint8]int{}
	for _, ev := range evs {
		byAddr[[4]uint8(ev.Addr[4:8])]++
	}
	total, err := tr.CgroupLimitStates(func(CgroupLimitKey, uint64) {})
	if err != nil {
		t.Fatal(err)
	}
	suppressed, _, err := tr.LimitCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failures toward one address, then 1 toward another: %d events (%v by address), held back %d by the key, %d by the cgroup", n, len(evs), byAddr, suppressed, total)
	if byAddr[[4]uint8{198, 19, 255, 255}] != 1 || byAddr[[4]uint8{198, 19, 255, 254}] != 1 || suppressed != n-1 || total != 0 {
		t.Errorf("events by address %v, %d held back by the key, %d by the cgroup: want 1 each, %d, 0", byAddr, suppressed, total, n-1)
	}
}
