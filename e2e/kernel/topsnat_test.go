package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
	"github.com/eaddr/eaddr/internal/testing/snatlab"
	"github.com/eaddr/eaddr/top"
)

// top shows the node's SNAT before a failure: the lab's node (as
// --host-netns, its sandbox the one netns audited) with its 4 SNAT ports
// toward the server all held, 3 by pod 0 and 1 by pod 1, read by the
// kernel's conntrack table: a row 4/4 at 100% of 40000-40003 whose most
// is pod 0's address (no runtime here: the address alone, no pod named),
// both sources and the fix under it, the conntrack line, each line within
// 120 columns; the JSON has the same numbers; the live view in a 120x40
// tmux the same row, with no line wrapped.
func TestTopNodeSNAT(t *testing.T) {
	l := snatlab.New(t, snatlab.Options{Tool: snatlab.ToolNft, Lo: 40000, Hi: 40003})
	l.Sandbox(t)
	l.Hold(t, 0, 3, 4)
	l.Hold(t, 1, 1, 4)
	node := strconv.FormatUint(l.Node.Inode(), 10)
	args := []string{"top", "--once", "--interval", "0", "--trace=false", "--host-netns", node, "--netns", node}
	out, _, _ := eaddrtest.Run(t, context.Background(), args...)
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 120 {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}
	for _, want := range []string{
		"198.18.0.1 -> 198.18.0.2:8080  tcp    4/4            [##########] 100%  40000-40003  10.98.1.2: 3",
		"  entries by source: 10.98.1.2 3, 10.98.2.2 1",
		"  fix: widen the MASQUERADE range (40000-40003, 4 ports;",
		"conntrack: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	t.Logf("eaddr %s:\n%s", strings.Join(args, " "), out)
	js, _, _ := eaddrtest.Run(t, context.Background(), append(args, "-o", "json")...)
	var snap top.Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	n := snap.Node
	if n == nil || len(n.SNAT) != 1 || n.SNAT[0].Entries != 4 || n.SNAT[0].Ports != 4 || len(n.SNAT[0].Holders) != 2 ||
		n.SNAT[0].Holders[0].Address != "10.98.1.2" || n.SNAT[0].Holders[0].Entries != 3 || n.SNAT[0].Holders[0].Pod != nil ||
		n.ConntrackEntries == nil || *n.ConntrackEntries < 4 || n.SNATUnknown != "" {
		t.Errorf("node %s", js)
	}

	// the live view in a 120x40 tmux: the same row, no line the terminal wrapped
	p := eaddrtest.StartTmux(t, 120, 40, fmt.Sprintf("%s top --interval 300ms --trace=false --host-netns %s --netns %s", eaddrtest.EaddrBin, node, node))
	live := p.WaitFor("the node's SNAT row", func(s string) bool { return strings.Contains(s, "4/4            [##########] 100%") })
	if !strings.Contains(live, "\n  entries by source: 10.98.1.2 3, 10.98.2.2 1\n") {
		t.Errorf("eaddr top: no sources under the row:\n%s", live)
	}
	p.NoWrapped(p.History())
	p.Keys("q")
}
