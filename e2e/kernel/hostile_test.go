package kernel

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Hostile arguments to connect()/bind() (testdata/clients/hostile.c): a NULL
// sockaddr, addrlen 0, addrlen beyond any sockaddr, unmapped memory, an
// unknown family, and a sockaddr rewritten by another thread during the
// calls. eaddr keeps running, reports each failure, and says where the
// address could not be read.
func TestHostileInput(t *testing.T) {
	testenv.RequireRoot(t)
	bin := testenv.CompileC(t, "gcc", "gcc", filepath.Join(t.TempDir(), "hostile"), "../../testdata/clients/hostile.c", "-pthread")
	p := eaddrtest.StartTrace(t, "--errno", "all", "--comm", "hostile", "--rate-limit", "0")
	cmd := exec.Command(bin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hostile: %v\n%s", err, out)
	}
	pid := cmd.Process.Pid
	// 7 single cases, then 200 racing connects (each fails one way or another).
	evs := p.ForPID(pid, 207, 10*time.Second)
	if len(evs) != 207 {
		t.Fatalf("%d events, want 207 (hostile printed:\n%s)", len(evs), out)
	}
	want := []struct {
		syscall, errno string
		where          string // "remote" or "local"
		unreadable     bool
		family         string
	}{
		{"connect", "EFAULT", "remote", true, ""},
		{"connect", "EINVAL", "", false, ""}, // addrlen 0: no address object
		{"connect", "EINVAL", "remote", false, "inet"},
		{"connect", "EFAULT", "remote", true, ""},
		{"connect", "EAFNOSUPPORT", "remote", false, "unknown:99"},
		{"bind", "EFAULT", "local", true, ""},
		{"bind", "EFAULT", "local", true, ""},
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Syscall != w.syscall || ev.Errno != w.errno {
			t.Errorf("case %d: %s %s, want %s %s", i, ev.Syscall, ev.Errno, w.syscall, w.errno)
			continue
		}
		a := ev.Remote
		if w.where == "local" {
			a = ev.Local
		}
		switch {
		case w.where == "":
			if ev.Remote != nil {
				t.Errorf("case %d: addrlen 0 but remote %+v", i, ev.Remote)
			}
		case a == nil:
			t.Errorf("case %d: no %s address", i, w.where)
		case w.unreadable && !strings.Contains(p.LineFor(ev), `"unreadable":true,"addrlen":16`):
			t.Errorf("case %d: %s not marked unreadable: %s", i, w.where, p.LineFor(ev))
		case w.family == "inet" && a.IP != "127.0.0.1":
			t.Errorf("case %d: %+v", i, a)
		case w.family == "unknown:99" && a.Family != "unknown:99":
			t.Errorf("case %d: family %q", i, a.Family)
		}
	}
	for _, ev := range evs[7:] {
		if ev.Syscall != "connect" || ev.Remote == nil {
			t.Errorf("racing connect: %+v", ev)
			break
		}
	}
}
