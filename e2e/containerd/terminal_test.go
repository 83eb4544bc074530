package containerd

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/critest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// A person runs eaddr trace in a 120-column terminal (tmux) while a pod's
// busybox wget fails: the screen shows, with no JSON and no wrapped line,
// when and who (the pod by name, the process), what failed, what the client
// printed, the cause with the holder's pid, and the fix.
func TestTraceAtATerminal(t *testing.T) {
	r := critest.Start(t)
	_, app, ns := eaddrtest.ExhaustedPod(t, r, "")
	cmd := fmt.Sprintf("%s trace --cri-endpoint %s --netns %d 2>/dev/null", eaddrtest.EaddrBin, r.Socket, ns.Inode())
	p := eaddrtest.StartTmux(t, 120, 40, cmd)
	// The trace is attached once it answers a failure: wget until it does.
	var screen string
	p.WaitFor("a failure with its fix", func(s string) bool {
		if strings.Contains(s, "  fix ") {
			screen = s
			return true
		}
		eaddrtest.WgetFails(t, r, app, 1)
		return false
	})
	t.Logf("the terminal showed:\n%s", strings.TrimRight(screen, "\n"))
	h := p.History()
	p.NoWrapped(h)
	if strings.Contains(h, `{"schema"`) {
		t.Errorf("JSON at a terminal:\n%s", h)
	}
	holder := strconv.Itoa(os.Getpid()) // netns.Exhaust's connections are the test's
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	for what, re := range map[string]string{
		"when and who": `(?m)^\d\d:\d\d:\d\d\.\d{3} \S+  pod shop/client container app · pid \d+ wget$`,
		"what failed":  `(?m)^  failed   connect\(\) to 127\.0\.0\.1:8080: EADDRNOTAVAIL`,
		"the client":   `(?m)^  client   busybox wget \(\w+\) printed: wget: can't connect to remote host \(127\.0\.0\.1\): `,
		"the cause":    `(?m)^  cause    ephemeral ports exhausted toward 127\.0\.0\.1:8080: [^\n]*(\n {11}[^\n]*)*held by pid ` + holder + ` `,
		"the fix":      `(?m)^  fix      pid ` + holder + ` \(` + regexp.QuoteMeta(strings.TrimSpace(string(comm))) + `\) holds 2 connections to this destination: reuse connections`,
	} {
		if !regexp.MustCompile(re).MatchString(h) {
			t.Errorf("the terminal does not show %s (%s)", what, re)
		}
	}
}

// eaddr demo in a 120-column terminal: each client's failure with its cause
// and fix, no JSON, no wrapped line. On a node with pods (a kubepods
// cgroup) whose runtime eaddr cannot reach (none at the default sockets
// here): the demo's clients are in no pod, so it does not warn about the
// runtime in a log line wider than the screen (a trace does).
func TestDemoAtATerminal(t *testing.T) {
	testenv.RequireRoot(t)
	eaddrtest.PodCgroup(t)
	p := eaddrtest.StartTmux(t, 120, 40, eaddrtest.EaddrBin+" demo")
	p.WaitFor("the demo's last line", func(s string) bool { return strings.Contains(s, "clients failed with an event from eaddr") })
	h := p.History()
	p.NoWrapped(h)
	if strings.Contains(h, `{"schema"`) {
		t.Errorf("JSON at a terminal:\n%s", h)
	}
	caught := strings.Count(h, "eaddr caught it:\n")
	if caught == 0 || strings.Count(h, "\n  cause    ") != caught || strings.Count(h, "\n  fix      ") < caught {
		t.Errorf("%d failures caught, but not each with its cause and fix:\n%s", caught, h)
	}
}
