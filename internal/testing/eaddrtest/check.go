package eaddrtest

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// SsCount counts, with iproute2's ss run inside ns, the TCP sockets in
// state (an ss state filter) toward dst whose local port is in [lo, hi].
func SsCount(t *testing.T, ns *netns.NS, state, dst string, lo, hi int) int {
	t.Helper()
	ss := testenv.Program(t, "ss", "iproute2")
	cmd := exec.Command(ss, "-tanH", "state", state, "dst", dst)
	var out strings.Builder
	cmd.Stdout = &out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ss: %v", err)
	}
	n := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		// With a state filter ss leaves the State column out: Recv-Q Send-Q Local Peer.
		local := f[2]
		p, err := strconv.Atoi(local[strings.LastIndexByte(local, ':')+1:])
		if err == nil && p >= lo && p <= hi {
			n++
		}
	}
	return n
}

func RunCheckJSON(t *testing.T, args ...string) (diagnose.CheckReport, int) {
	t.Helper()
	out, errOut, code := Run(t, context.Background(), append([]string{"check", "-o", "json"}, args...)...)
	var rep diagnose.CheckReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check output: %v\n%s\n%s", err, out, errOut)
	}
	return rep, code
}

func HasFinding(r diagnose.NetNSReport, sev diagnose.Severity, substr string) bool {
	for _, f := range r.Findings {
		if f.Severity == sev && strings.Contains(f.Message, substr) {
			return true
		}
	}
	return false
}
