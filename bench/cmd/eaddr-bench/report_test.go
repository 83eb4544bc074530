package main

import "testing"

// TestParseBenchLine: a port sample's line gives its own metrics (the
// share of a core, the cost a socket) beside ns/op, B/op and allocs/op.
func TestParseBenchLine(t *testing.T) {
	line := "BenchmarkPortSampleNode/100x500/walk-2         \t       3\t 655862416 ns/op\t         2.406 %core@15s\t   3609033 cpu-ns/netns\t 360903333 cpu-ns/op\t      7218 cpu-ns/socket\t 125610333 sys-ns/op\t160709597 B/op\t   20716 allocs/op"
	g, ok := parseBenchLine(line)
	if !ok || g.name != "BenchmarkPortSampleNode/100x500/walk" || g.nsPerOp != 655862416 || g.bytesPerOp != 160709597 || g.allocs != 20716 ||
		g.metrics["%core@15s"] != 2.406 || g.metrics["cpu-ns/socket"] != 7218 {
		t.Errorf("%v %+v", ok, g)
	}
	if _, ok := parseBenchLine("ok  \tgithub.com/eaddr/eaddr/ports\t99s"); ok {
		t.Error("a package's line read as a result")
	}
}
