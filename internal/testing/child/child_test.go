package child

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A server that outlives SIGTERM's grace is killed and said so, not a
// failure: on a loaded machine kube-apiserver can take longer to stop.
func TestStopKillsAfterGrace(t *testing.T) {
	for _, c := range []struct {
		script string
		grace  time.Duration // the second's is long: a loaded machine may be slow to end it
		killed bool
	}{
		{`trap "" TERM; echo ready; while :; do sleep 0.05; done`, 50 * time.Millisecond, true},
		{`echo ready; exec sleep 100`, time.Minute, false},
	} {
		log := t.TempDir() + "/log"
		p, err := Start("sh", log, exec.Command("/bin/sh", "-c", c.script))
		if err != nil {
			t.Fatal(err)
		}
		for b, _ := os.ReadFile(log); !strings.Contains(string(b), "ready"); b, _ = os.ReadFile(log) {
			time.Sleep(10 * time.Millisecond) // the trap is set once ready is written
		}
		killed, err := p.Stop(c.grace)
		if killed != c.killed || err != nil || !p.Exited() {
			t.Errorf("%q: killed %v, err %v, exited %v; want killed %v, no error", c.script, killed, err, p.Exited(), c.killed)
		}
	}
}
