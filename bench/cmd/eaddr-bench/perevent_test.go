package main

import "testing"

func TestBenchLine(t *testing.T) {
	for _, c := range []struct{ line, name, ns, allocs string }{
		{"BenchmarkEventJSON-2   	 4868516	       254.5 ns/op	1693.36 MB/s	       0 B/op	       0 allocs/op", "BenchmarkEventJSON", "254.5", "0"},
		{"BenchmarkSteadyEvent-2   	  352188	      3327 ns/op	         0.0004657 dropped/op	      13 B/op	       2 allocs/op", "BenchmarkSteadyEvent", "3327", "2"},
		{"BenchmarkCgroupPath-2 	 100	 812 ns/op	 64 B/op	 1 allocs/op", "BenchmarkCgroupPath", "812", "1"},
	} {
		m := benchLine.FindStringSubmatch(c.line)
		if m == nil || m[1] != c.name || m[2] != c.ns || m[4] != c.allocs {
			t.Errorf("%q: got %q, want %s %s ns/op %s allocs/op", c.line, m, c.name, c.ns, c.allocs)
		}
	}
}
