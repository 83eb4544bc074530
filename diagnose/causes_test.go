package diagnose

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/internal/mountinfo"
	"github.com/eaddr/eaddr/internal/testing/sockscene"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/tracer"
)

// causeCase is what the diagnosis of one scene must say: its cause, the
// holder it names (a scene holder's role; "" when no process holds the
// ports), text its fixes must have and must not have.
type causeCase struct {
	scene  string
	cause  string
	holder string
	fix    []string
	notFix []string
	noFix  bool // a verdict without any fix
}

var causeCases = []causeCase{
	// The scenes' netns are no pod's, and their servers listen on 8080 and 8081: a wider range
	// starts above them (fixapply_test.go applies it to a netns and asks the kernel).
	{scene: "established", cause: CausePerDestination, holder: "clients", fix: []string{"connection pool",
		`widen this network namespace's range (it is no pod's): nsenter -t `, ` -n sysctl -w net.ipv4.ip_local_port_range="8082 65535" gives 57454 ports (now 10)`},
		notFix: []string{"the pod's range", "securityContext", `"1024 65535"`}},
	{scene: "bind-before-connect", cause: CauseBindBeforeConnect, holder: "clients", fix: []string{"IP_BIND_ADDRESS_NO_PORT"}},
	{scene: "bound-only", cause: CauseBoundOnly, holder: "clients", fix: []string{"never connected"}},
	{scene: "listener-in-range", cause: CausePerDestination, holder: "clients", fix: []string{
		`widen this network namespace's range (it is no pod's): nsenter -t `, ` -n sysctl -w net.ipv4.ip_local_port_range="1024 65535" net.ipv4.ip_local_reserved_ports=8080,40005 gives 64510 ports (now 10)`},
		notFix: []string{`net.ipv4.ip_local_port_range="1024 65535" gives`}},
	{scene: "close-wait-leak", cause: CauseCloseWait, holder: "clients", fix: []string{"never closes its sockets after the peer's FIN"}, notFix: []string{"connection pool"}},
	{scene: "fin-wait2-orphans", cause: CauseOrphans, fix: []string{"tcp_fin_timeout="}},
	{scene: "time-wait", cause: CauseTimeWait, fix: []string{"(now 0)"}}, // and tcp_tw_reuse=1 where the scene saw it work
	{scene: "time-wait-loopback", cause: CauseTimeWait, fix: []string{"already on here (net.ipv4.tcp_tw_reuse=2)"}, notFix: []string{"tcp_tw_reuse=1 in this netns"}},
	{scene: "four-tuple", cause: CauseFourTuple, holder: "clients", fix: []string{"IP_BIND_ADDRESS_NO_PORT"}},
	{scene: "address-gone", cause: CauseAddressMissing, fix: []string{"bind to one of the netns's addresses"}},
	{scene: "address-tentative", cause: CauseAddressNotReady, fix: []string{"tentative"}},
	{scene: "bind-port0", cause: CausePerDestination, holder: "clients", fix: []string{"IP_BIND_ADDRESS_NO_PORT"}, notFix: []string{"to this destination"}},
	{scene: "bind-in-use-listener", cause: CausePortTaken, holder: "listener", fix: []string{"SO_REUSEADDR would not help"}},
	// The fix follows what the scene saw the kernel do with SO_REUSEADDR on
	// the new socket alone (Scene.FixWorks): see fixTruth.
	{scene: "bind-in-use-timewait", cause: CausePortTaken},
	{scene: "udp-exhausted", cause: CauseUDPExhausted, holder: "clients", fix: []string{"UDP sockets on every port"}},
	{scene: "udp-bind-port0", cause: CauseUDPExhausted, holder: "clients", fix: []string{"UDP sockets on every port"}},
	{scene: "reserved", cause: CausePerDestination, holder: "clients", fix: []string{"connection pool"}},
}

// TestCauses makes each way ports run out happen for real (internal/testing/sockscene:
// real sockets in a throwaway netns, the holders in other processes, the
// errno as the kernel gave it) and checks the diagnosis's cause, holder and
// fixes, read through the BPF socket iterator. With EADDR_DIAGNOSES_REPORT=path
// it writes the table of docs/diagnoses.md.
func TestCauses(t *testing.T) {
	testenv.RequireRoot(t)
	it, err := tracer.NewSockIter()
	if err != nil {
		testenv.Skip(t, "no BPF socket iterator: "+err.Error())
	}
	t.Cleanup(func() { it.Close() })
	var rows []string
	for _, c := range causeCases {
		t.Run(c.scene, func(t *testing.T) {
			s := sockscene.Build(t, c.scene)
			startIn(t, s.NS) // the pod's pause process: the failing call came from the test, not from the netns
			d := NewDiagnoser()
			d.Iter = it
			g := d.Diagnose(sceneEvent(s))
			if g == nil {
				t.Fatalf("%s (%s %v): no diagnosis", c.scene, s.Sys, s.Errno)
			}
			checkCause(t, fixTruth(c, s), s, g)
			rows = append(rows, reportRow(c, s, g))
		})
	}
	writeReport(t, rows)
}

// fixTruth: where a scene tried SO_REUSEADDR for real, the fix must say
// what the kernel did: set it when that worked, and never when it did not.
func fixTruth(c causeCase, s *sockscene.Scene) causeCase {
	if strings.Contains(s.Fix, "tcp_tw_reuse=1") {
		if s.FixWorks {
			c.fix = append(c.fix, "net.ipv4.tcp_tw_reuse=1 in this netns")
		} else {
			c.notFix = append(c.notFix, "net.ipv4.tcp_tw_reuse=1 in this netns")
		}
		return c
	}
	if !strings.Contains(s.Fix, "SO_REUSEADDR") {
		return c
	}
	if s.FixWorks {
		c.fix = append(c.fix, "set SO_REUSEADDR on the socket before bind()")
	} else {
		c.notFix = append(c.notFix, "set SO_REUSEADDR on the socket before bind()")
		c.fix = append(c.fix, "would not help")
	}
	return c
}

// sceneEvent is the event eaddr reads for the scene's failing call.
func sceneEvent(s *sockscene.Scene) *decode.Event {
	ev := &decode.Event{Errno: int(s.Errno), NetNS: uint32(s.NS.Inode()), PID: uint32(s.VictimPID), PPID: uint32(os.Getppid()),
		HasSocket: true, Family: unix.AF_INET, Protocol: unix.IPPROTO_TCP}
	ev.Syscall = decode.Connect
	if s.Sys == "bind" {
		ev.Syscall = decode.Bind
	}
	if s.Proto == "udp" {
		ev.Protocol = unix.IPPROTO_UDP
	}
	a := s.Remote
	if s.Sys == "bind" {
		a = s.Local
	}
	if a.Addr().Unmap().Is6() {
		ev.Family = unix.AF_INET6
	}
	if s.Local.IsValid() {
		ev.Local = decode.Addr{Valid: true, Family: ev.Family, IP: s.Local}
	}
	if s.Remote.IsValid() {
		ev.Remote = decode.Addr{Valid: true, Family: ev.Family, IP: s.Remote}
	}
	return ev
}

func checkCause(t *testing.T, c causeCase, s *sockscene.Scene, g *Diagnosis) {
	t.Helper()
	fixes := strings.Join(g.Fix, "\n")
	if g.Cause != c.cause {
		t.Errorf("%s: cause %q, want %q\nverdict: %s\nfix: %s\nss: %+v", c.scene, g.Cause, c.cause, g.Verdict, fixes, s.Truth)
	}
	if want := holderPID(s, c.holder); want != 0 && (len(g.Holders) == 0 || g.Holders[0].PID != want) {
		t.Errorf("%s: holders %+v, want pid %d (%s) first; verdict: %s", c.scene, g.Holders, want, c.holder, g.Verdict)
	}
	for _, h := range g.Holders {
		if h.PID == s.VictimPID {
			t.Errorf("%s: the victim pid %d named as a holder", c.scene, h.PID)
		}
	}
	for _, f := range c.fix {
		if !strings.Contains(fixes, f) && !strings.Contains(g.Verdict, f) {
			t.Errorf("%s: no %q in the fixes:\n%s\nverdict: %s", c.scene, f, fixes, g.Verdict)
		}
	}
	for _, f := range c.notFix {
		if strings.Contains(fixes, f) {
			t.Errorf("%s: %q advised, which cannot work here:\n%s", c.scene, f, fixes)
		}
	}
	if g.Source != "iterator" && g.Source != "" {
		t.Errorf("%s: sockets read from %q, want the iterator", c.scene, g.Source)
	}
}

// holderPID is the pid of the scene's holder with role, 0 for none.
func holderPID(s *sockscene.Scene, role string) int {
	for _, h := range s.Holders {
		if role != "" && h.Role == role {
			return h.PID
		}
	}
	return 0
}

func reportRow(c causeCase, s *sockscene.Scene, g *Diagnosis) string {
	fix := "none"
	if len(g.Fix) > 0 {
		fix = g.Fix[0]
	}
	return fmt.Sprintf("| %s | %s %s %s | `%s` | %s | %s |", c.scene, s.Proto, s.Sys, errnoName(s.Errno), g.Cause, md(g.Verdict), md(fix))
}

func errnoName(e syscall.Errno) string { return decode.ErrnoName(int(e)) }

func md(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func writeReport(t *testing.T, rows []string) {
	path := os.Getenv("EADDR_DIAGNOSES_REPORT")
	if path == "" || t.Failed() {
		return
	}
	head := "| scene (internal/testing/sockscene) | call | cause | verdict | first fix |\n|---|---|---|---|---|\n"
	if err := os.WriteFile(path, []byte(head+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Error(err)
	}
}

// TestHolderPod: a holder in a pod's cgroup is named with its pod UID and
// container ID, read from its cgroup path (a hostNetwork pod's holder is
// another pod than the failing process's).
func TestHolderPod(t *testing.T) {
	testenv.RequireRoot(t)
	it, err := tracer.NewSockIter()
	if err != nil {
		testenv.Skip(t, "no BPF socket iterator: "+err.Error())
	}
	t.Cleanup(func() { it.Close() })
	s := sockscene.Build(t, "established")
	startIn(t, s.NS)
	uid, cid := intoPodCgroup(t, holderPID(s, "clients"))
	d := NewDiagnoser()
	d.Iter = it
	g := d.Diagnose(sceneEvent(s))
	if len(g.Holders) == 0 || g.Holders[0].PodUID != uid || g.Holders[0].ContainerID != cid {
		t.Errorf("holders %+v, want pod %s container %s", g.Holders, uid, cid)
	}
}

// intoPodCgroup moves pid into a kubepods-style cgroup (cgroupfs layout)
// under the cgroup2 mount, and back out at cleanup, before the cgroup goes.
func intoPodCgroup(t *testing.T, pid int) (uid, cid string) {
	t.Helper()
	root := ""
	mounts, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			root = m.MountPoint
			break
		}
	}
	if root == "" {
		testenv.Skip(t, "no cgroup2 mount")
	}
	rnd := make([]byte, 32)
	rand.Read(rnd)
	uid = fmt.Sprintf("%x-%x-%x-%x-%x", rnd[0:4], rnd[4:6], rnd[6:8], rnd[8:10], rnd[10:16])
	cid = hex.EncodeToString(rnd)
	top := filepath.Join(root, "eaddr-test-"+cid[:8])
	leaf := filepath.Join(top, "kubepods", "besteffort", "pod"+uid, cid)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		for d := leaf; strings.HasPrefix(d, top); d = filepath.Dir(d) {
			os.Remove(d)
		}
	})
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return uid, cid
}
