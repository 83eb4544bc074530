package nodeport

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// run runs a program inside ns and fails the test when it fails.
func run(t *testing.T, ns *netns.NS, prog string, args ...string) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := ns.Start(cmd); err != nil {
		t.Fatalf("%s %s: %v", prog, strings.Join(args, " "), err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out.String())
	}
}

// readIn runs Read on a thread inside ns.
func readIn(t *testing.T, ns *netns.NS) *Table {
	t.Helper()
	var tab *Table
	err := ns.Do(func() error {
		var err error
		tab, err = Read()
		return err
	})
	if err != nil {
		t.Fatalf("Read in %s: %v", ns, err)
	}
	t.Logf("Read in %s: %s", ns, tab)
	return tab
}

// source returns the Source of name.
func source(t *testing.T, tab *Table, name string) Source {
	t.Helper()
	for _, s := range tab.Sources {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no source %s in %s", name, tab)
	return Source{}
}

// wantHit checks that Find gives the rule wanted.
func wantHit(t *testing.T, tab *Table, proto uint8, port uint16, want Hit) {
	t.Helper()
	got, ok := tab.Find(proto, port)
	if !ok {
		t.Errorf("Find(%d, %d): no hit, want %+v", proto, port, want)
		return
	}
	if got != want {
		t.Errorf("Find(%d, %d) = %+v, want %+v", proto, port, got, want)
	}
}

// wantMiss checks that Find finds nothing.
func wantMiss(t *testing.T, tab *Table, proto uint8, port uint16) {
	t.Helper()
	if got, ok := tab.Find(proto, port); ok {
		t.Errorf("Find(%d, %d) = %+v, want no hit", proto, port, got)
	}
}
