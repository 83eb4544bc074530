package kube

import (
	"path/filepath"
	"testing"
)

// Names is asked on every event of a pod whose names are not cached: it must
// not allocate, also for a pod-level cgroup (asked by pod UID).
func TestNamesDoesNotAllocate(t *testing.T) {
	r := NewResolver(filepath.Join(t.TempDir(), "no.sock"), false, nil)
	defer r.Close()
	key := Key("", "03f3f104-3215-44f2-9686-d4dd1f05a7ed")
	if _, st, why := r.Names(key); st != Unavailable || why == "" {
		t.Fatalf("no runtime: status %v (%q), want Unavailable with a reason", st, why)
	}
	if n := testing.AllocsPerRun(100, func() { r.Names(key) }); n != 0 {
		t.Errorf("Names allocates %.1f times per call", n)
	}
}
