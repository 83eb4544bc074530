package main

import "testing"

func TestRateLimitOff(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"trace"}, false},
		{[]string{"trace", "--explain", "short"}, false},
		{[]string{"trace", "--rate-limit", "off"}, true},
		{[]string{"trace", "-rate-limit", "0"}, true},
		{[]string{"trace", "--rate-limit=off"}, true},
		{[]string{"trace", "--rate-limit=100/s"}, false},
		{[]string{"trace", "--rate-limit", "100/s"}, false},
		{[]string{"trace", "--rate-limit"}, false},
		{[]string{"trace", "off"}, false},
	} {
		if got := rateLimitOff(c.args); got != c.want {
			t.Errorf("rateLimitOff(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	if got, want := identity("a = b", 5, 5), "a = b: 5 = 5, exact"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := identity("a = b", 3, 5), "a = b: 3 vs 5, differs by -2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStormCounts(t *testing.T) {
	kv := logfmt(`time=2026-12-01T12:00:00Z level=INFO msg=stopped events=10 written=4 delivered=3 filtered=1 filtered_unresolved=0 lost=2 dropped=1 suppressed=5 malformed=0`)
	m, ok := stormCounts(kv)
	if !ok || m["events"] != 10 || m["lost"] != 2 || m["suppressed"] != 5 || m["dropped"] != 1 {
		t.Fatalf("stormCounts = %v, %v", m, ok)
	}
	delete(kv, "filtered_unresolved")
	if _, ok := stormCounts(kv); ok {
		t.Error("stormCounts accepted a line without filtered_unresolved")
	}
}
