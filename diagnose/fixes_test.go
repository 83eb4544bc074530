package diagnose

import "testing"

// TestHoldPhrase: a fix names every holder found and never says one holds
// what several do, nor that they hold more than was seen (two nc clients
// with one connection each were once "pid 15834 (nc) holds 2 connections").
func TestHoldPhrase(t *testing.T) {
	nc := func(pid, n int) Holder { return Holder{PID: pid, Comm: "nc", Sockets: n} }
	for _, c := range []struct {
		hs   []Holder
		n    int
		want string
	}{
		{nil, 2, "a process that could not be found holds 2 connections"},
		{[]Holder{nc(7, 2)}, 2, "pid 7 (nc) holds 2 connections"},
		{[]Holder{nc(7, 1), nc(9, 1)}, 2, "pid 7 (nc) and pid 9 (nc) hold 2 connections"},
		{[]Holder{nc(7, 1), nc(9, 1), nc(11, 1)}, 3, "pid 7 (nc), pid 9 (nc) and pid 11 (nc) hold 3 connections"},
		{[]Holder{nc(7, 1)}, 2, "pid 7 (nc) holds 1 of the 2 connections"},
		{[]Holder{nc(7, 2), nc(9, 1)}, 5, "pid 7 (nc) and pid 9 (nc) hold 3 of the 5 connections"},
	} {
		if got := holdPhrase(c.hs, c.n, "connections"); got != c.want {
			t.Errorf("holdPhrase(%v, %d) = %q, want %q", c.hs, c.n, got, c.want)
		}
	}
}
