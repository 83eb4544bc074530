package kernel

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// memBoundMiB is the most memory (VmHWM) eaddr trace and eaddr check take
// whatever a neighbour's netns holds (docs/performance.md, "Memory"): the
// port sampler counts sockets as they are read, and a diagnosis keeps at
// most MaxSnapshotSockets of them.
const memBoundMiB = 96

// The manifest's limit (deploy/base/daemonset.yaml), under which the test
// runs eaddr trace.
const manifestLimit = "256M"

// hostileNetNS is a netns holding as many sockets as this machine lets one
// netns hold: TIME_WAIT up to its bucket cap (net.ipv4.tcp_max_tw_buckets)
// (two processes churning connections toward 128 listeners reach it in
// seconds; a TIME_WAIT lives 60 s); and about 200,000
// established sockets over eleven processes, each holding up to 20,000
// descriptors (the most a process may here), both ends of 9,000
// connections toward a listener of its own. The port range is 9,000 ports
// (41000-49999), so that the first of them, toward hostileFull, leaves no
// port toward it: a count that stays, unlike TIME_WAIT's.
type hostileNetNS struct {
	ns   *netns.NS
	pids []int
}

const (
	hostileRange = "41000 49999"
	hostilePorts = 9000
	hostileFull  = "127.0.0.1:5001"
)

// hostileEstablished connects toward its listener until no port is left
// toward it or n are made, and holds both ends.
const hostileEstablished = `import socket, sys, errno
port, n = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port)); l.listen(4096)
cs, ss = [], []
while len(cs) < n:
    try:
        cs.append(socket.create_connection(("127.0.0.1", port)))
    except OSError as e:
        if e.errno == errno.EADDRNOTAVAIL:
            break
        raise
    ss.append(l.accept()[0])
print("ready", flush=True)
sys.stdin.read()
`

// hostileTimeWait churns connections toward its 64 listeners, the server's
// end closing first, so that each leaves a TIME_WAIT of a 4-tuple of its
// own; it says "ready" once the netns holds its cap (argv[2]) of them (or
// after 120 s, whatever it holds then), and churns on, to keep them there.
// Many listeners, so that each destination holds few of them: toward one
// destination, connect()'s search for a free port slows as its TIME_WAITs
// fill the range (with eight listeners each, the two held about 72,000
// TIME_WAIT after 120 s here; with 64 each, they reach the cap of 131,072
// in 4 s).
const hostileTimeWait = `import socket, sys, time
port, cap = int(sys.argv[1]), int(sys.argv[2])
ls = []
for p in range(port, port + 64):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", p)); l.listen(4096); ls.append((p, l))
def tw():
    for line in open("/proc/self/net/sockstat"):
        f = line.split()
        if f[0] == "TCP:":
            return int(f[f.index("tw") + 1])
said, i, t0 = False, 0, time.time()
while True:
    p, l = ls[i % 64]
    c = socket.create_connection(("127.0.0.1", p)); s = l.accept()[0]
    s.close(); c.recv(1); c.close(); i += 1
    if not said and i % 1000 == 0 and (tw() >= cap or time.time() > t0 + 120):
        print("ready", flush=True); said = True
`

func newHostileNetNS(t *testing.T) *hostileNetNS {
	t.Helper()
	ns := testns.New(t)
	for name, v := range map[string]string{"net.ipv4.ip_local_port_range": hostileRange, "net.ipv4.tcp_tw_reuse": "0"} {
		if err := ns.SetSysctl(name, v); err != nil {
			t.Fatal(err)
		}
	}
	h := &hostileNetNS{ns: ns}
	// A listener's port is outside the range: the ports in use toward
	// hostileFull are its connections' alone.
	est := []io.Reader{h.start(t, hostileEstablished, 5001, hostilePorts+1)}
	for i := range 10 {
		est = append(est, h.start(t, hostileEstablished, 6000+i, hostilePorts))
	}
	h.ready(t, est...)
	capTW, err := ns.Sysctl("net.ipv4.tcp_max_tw_buckets")
	if err != nil {
		t.Fatal(err)
	}
	tw := mustAtoi(t, capTW)
	h.ready(t, h.start(t, hostileTimeWait, 7000, 0), h.start(t, hostileTimeWait, 7064, tw))
	// Two churning processes reach the cap here in seconds beside the
	// established ones: a machine that holds fewer than half of it after
	// 120 s of churn tests too little.
	if n := h.timeWaits(t); n < tw/2 {
		t.Fatalf("the netns holds %d TIME_WAIT after 120 s of churn; its cap is %d", n, tw)
	}
	return h
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// start runs script in the netns with its port and count; its stdout
// says when it is ready.
func (h *hostileNetNS) start(t *testing.T, script string, port, n int) io.Reader {
	t.Helper()
	cmd := exec.Command("python3", "-c", script, strconv.Itoa(port), strconv.Itoa(n))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr // a script's traceback, in the test's output
	if err := h.ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	h.pids = append(h.pids, cmd.Process.Pid)
	return out
}

// ready waits for each script's "ready".
func (h *hostileNetNS) ready(t *testing.T, outs ...io.Reader) {
	t.Helper()
	for _, out := range outs {
		line := make([]byte, 6)
		if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
			t.Fatalf("a script of the hostile netns: %q %v", line, err)
		}
	}
}

// timeWaits is the netns's TIME_WAIT count (/proc/net/sockstat).
func (h *hostileNetNS) timeWaits(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/sockstat", h.pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[0] == "TCP:" && f[i] == "tw" {
				n, _ := strconv.Atoi(f[i+1])
				return n
			}
		}
	}
	t.Fatalf("no TIME_WAIT count in /proc/%d/net/sockstat:\n%s", h.pids[0], b)
	return 0
}

// memCgroup makes a memory cgroup limited as the manifest limits eaddr
// (cgroup v2's memory.max, else v1's memory.limit_in_bytes) and returns a
// setup that runs a command in it (through sh, which moves itself in and
// execs the command: the pid stays the command's), and the cgroup's OOM
// counts (memory.events, memory.oom_control), each with its "oom_kill N"
// line.
func memCgroup(t *testing.T, what string) (setup func(*exec.Cmd), events func() string, peakMiB func() int) {
	t.Helper()
	name := fmt.Sprintf("eaddr-memtest-%s-%d", what, os.Getpid())
	dir, limit, oom, peak := filepath.Join("/sys/fs/cgroup", name), "memory.max", "memory.events", "memory.peak"
	var fs unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		dir, limit, oom, peak = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes", "memory.oom_control", "memory.max_usage_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Skip(t, "no memory cgroup to make: "+err.Error())
	}
	t.Cleanup(func() {
		for range 50 {
			if os.Remove(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("cgroup %s left behind", dir)
	})
	if err := os.WriteFile(filepath.Join(dir, limit), []byte(manifestLimit), 0); err != nil {
		t.Fatal(err)
	}
	setup = func(cmd *exec.Cmd) {
		procs := filepath.Join(dir, "cgroup.procs")
		cmd.Args = append([]string{"sh", "-c", `echo $$ > "` + procs + `" && exec "$0" "$@"`}, cmd.Args...)
		cmd.Path = "/bin/sh"
	}
	events = func() string {
		b, _ := os.ReadFile(filepath.Join(dir, oom))
		return string(b)
	}
	peakMiB = func() int {
		b, err := os.ReadFile(filepath.Join(dir, peak))
		n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || perr != nil {
			t.Fatalf("the cgroup's peak (%s): %v %v", peak, err, perr)
		}
		return int(n >> 20)
	}
	return setup, events, peakMiB
}

// TestMemoryBoundedByNeighbourSockets: a neighbour's netns holding as many
// sockets as this machine lets one netns hold (its TIME_WAIT cap, no port
// left toward one of its destinations, about 200,000 established sockets
// over ten processes), beside the node's usual load, takes neither eaddr
// trace (its port sampler and the diagnosis of a failure there, run under
// the manifest's memory limit) nor eaddr check past memBoundMiB; trace is
// not killed; and the sampler's gauges are what ss counts.
func TestMemoryBoundedByNeighbourSockets(t *testing.T) {
	testenv.RequireRoot(t)
	if testing.Short() {
		t.Skip("makes about 330,000 sockets")
	}
	setup, events, _ := memCgroup(t, "trace")
	h := newHostileNetNS(t)
	ino := strconv.FormatUint(h.ns.Inode(), 10)
	// The diagnosis of a failure there reads a quarter of a million
	// sockets: more than the default wait (the test is of memory, not
	// of latency).
	p := eaddrtest.StartTraceWith(t, setup, "--netns", ino, "--metrics-addr", "127.0.0.1:0", "--ports-interval", "2s", "--diagnose-wait", "30s")
	base := p.MetricsURL(t)
	const full = hostileFull
	inUse := waitGauge(t, base, ino, full)
	if est := eaddrtest.SsCount(t, h.ns, "established", full, 41000, 49999); inUse != float64(est) || est != hostilePorts {
		t.Errorf("ports in use toward %s: %v; ss: %d established, of %d", full, inUse, est, hostilePorts)
	}
	failing := h.connectFails(t, full)
	evs := p.ForPID(failing, 1, 30*time.Second)
	if len(evs) != 1 || evs[0].Diagnosis == nil || !strings.Contains(evs[0].Diagnosis.Verdict, "ephemeral ports exhausted toward "+full) {
		t.Errorf("the failure toward %s: %d events, diagnosis %s", full, len(evs), verdicts(evs))
	}
	traceHWM := vmHWM(t, p.Cmd.Process.Pid)
	checkHWM := checkPeak(t, ino)
	t.Logf("%d TIME_WAIT in the netns; VmHWM of eaddr trace %d MiB, of eaddr check %d MiB; memory.events:\n%s", h.timeWaits(t), traceHWM, checkHWM, events())
	if traceHWM > memBoundMiB || checkHWM > memBoundMiB {
		t.Errorf("VmHWM: trace %d MiB, check %d MiB; the bound is %d MiB", traceHWM, checkHWM, memBoundMiB)
	}
	select {
	case <-p.Done():
		t.Errorf("eaddr trace exited while the test ran: %s", events())
	default:
	}
	if !strings.Contains(events(), "\noom_kill 0\n") {
		t.Errorf("a process of the cgroup was killed for memory: %s", events())
	}
}

// waitGauge waits for the sampler's gauge of the ports in use toward dst in
// netns ino.
func waitGauge(t *testing.T, base, ino, dst string) float64 {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		for _, m := range eaddrtest.Scrape(t, base)["eaddr_ephemeral_ports_in_use"].GetMetric() {
			if eaddrtest.Labels(m)["netns"] == ino && eaddrtest.Labels(m)["destination"] == dst {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no eaddr_ephemeral_ports_in_use{netns=%q, destination=%q} in 60s", ino, dst)
	return 0
}

// connectFails runs a connect() toward dst in the netns, which fails, and
// returns its process's pid.
func (h *hostileNetNS) connectFails(t *testing.T, dst string) int {
	t.Helper()
	host, port, _ := strings.Cut(dst, ":")
	cmd := exec.Command("python3", "-c", fmt.Sprintf("import socket\ntry:\n    socket.create_connection((%q, %s))\nexcept OSError as e:\n    print(e.errno)", host, port))
	var out strings.Builder
	cmd.Stdout = &out
	if err := h.ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if strings.TrimSpace(out.String()) != strconv.Itoa(int(unix.EADDRNOTAVAIL)) {
		t.Fatalf("connect toward %s: %q, want EADDRNOTAVAIL", dst, out.String())
	}
	return cmd.Process.Pid
}

// vmHWM is the peak resident memory of pid, in MiB.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// checkPeak runs eaddr check of netns ino in a memory cgroup of its own,
// under the manifest's limit, and returns the cgroup's peak, in MiB: the
// memory the limit is held against. Not the child's ru_maxrss: os/exec
// starts it with vfork, and exec records the old mm's high-water mark,
// the test binary's (CI read 242 MiB for a check of about 35).
func checkPeak(t *testing.T, ino string) int {
	t.Helper()
	setup, _, peakMiB := memCgroup(t, "check")
	cmd := exec.Command(eaddrtest.EaddrBin, "check", "--netns", ino, "-o", "json")
	setup(cmd)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out.String(), `"exhausted":true`) {
		t.Errorf("eaddr check: exit %d (%v), want 1 and an exhausted destination:\n%s\n%s", code, err, out.String(), stderr.String())
	}
	return peakMiB()
}

// verdicts are the events' diagnoses, for a failure's message.
func verdicts(evs []eaddrtest.JSONEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%+v; ", ev.Diagnosis)
	}
	return b.String()
}
