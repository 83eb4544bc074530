package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
)

// Bounded memory: 20,000 short-lived processes in 2,000 cgroups and 200
// network namespaces fail while eaddr traces them. Every cache stays within
// its bound, and eaddr's RSS after the churn is within a few MiB of its RSS
// after the first quarter (the point by which every cgroup and netns has
// been seen): it does not grow with the number of processes.
func TestSoakBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: not in -short")
	}
	testenv.RequireRoot(t)
	dir := t.TempDir()
	// A name of its own (comm keeps 15 bytes): --comm then keeps this run's
	// processes only, not those of a soak running beside it on the node.
	tag := make([]byte, 4)
	rand.Read(tag)
	churn := testenv.CompileC(t, "gcc", "gcc", filepath.Join(dir, "churn-"+hex.EncodeToString(tag)), "../../testdata/clients/churn.c")
	const nNetNS, nCgroups, nProcs = 200, 2000, 20000
	var nsList strings.Builder
	for range nNetNS {
		ns, err := netns.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		ex, err := netns.Exhaust(ns, "tcp4", "127.0.0.1:8080", 40000, 40001)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		nsList.WriteString(ns.Path() + "\n")
	}
	root := cgroup2Mount(t)
	rnd := make([]byte, 4)
	rand.Read(rnd)
	top := filepath.Join(root, "eaddr-soak-"+hex.EncodeToString(rnd))
	var cgList strings.Builder
	var leaves []string
	for range nCgroups {
		id := make([]byte, 32)
		rand.Read(id)
		uid := fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
		leaf := filepath.Join(top, "kubepods", "besteffort", "pod"+uid, hex.EncodeToString(id))
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leaf)
		cgList.WriteString(leaf + "\n")
	}
	t.Cleanup(func() {
		for _, l := range leaves {
			for d := l; strings.HasPrefix(d, top) && d != filepath.Join(top, "kubepods", "besteffort"); d = filepath.Dir(d) {
				os.Remove(d)
			}
		}
		os.Remove(filepath.Join(top, "kubepods", "besteffort"))
		os.Remove(filepath.Join(top, "kubepods"))
		os.Remove(top)
	})
	nsFile, cgFile := filepath.Join(dir, "netns"), filepath.Join(dir, "cgroups")
	os.WriteFile(nsFile, []byte(nsList.String()), 0o644)
	os.WriteFile(cgFile, []byte(cgList.String()), 0o644)

	// Lossless by construction: the ring holds every event of the churn and
	// as many again from the rest of the node even if eaddr never read
	// (40,000 x 344 bytes < 32 MiB), so the delivery check below is exact
	// and a loss fails the test instead of excusing it.
	p := startTrace(t, "--metrics-addr", "127.0.0.1:0", "--comm", filepath.Base(churn), "--explain", "short", "--ring-size", strconv.Itoa(soakRing))
	base := p.metricsURL(t)
	run := func(n int) {
		t.Helper()
		out, err := exec.Command(churn, strconv.Itoa(n), nsFile, cgFile).CombinedOutput()
		if err != nil {
			t.Fatalf("churn: %v: %s", err, out)
		}
	}
	// rss samples once eaddr has written the first n failures (RSS is read
	// at the scrape): however far behind the churn eaddr is on this
	// machine, the samples are taken at the same points of its work.
	rss := func(n int) (float64, map[string]*dto.MetricFamily) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			p.mu.Lock()
			written := len(p.events)
			p.mu.Unlock()
			fams := scrape(t, base)
			if written >= n {
				return fams["process_resident_memory_bytes"].GetMetric()[0].GetGauge().GetValue(), fams
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d churn failures written within 5 minutes", written, n)
			}
		}
	}
	start := time.Now()
	run(nProcs / 4)
	rss1, _ := rss(nProcs / 4)
	run(nProcs * 3 / 4)
	rss2, fams := rss(nProcs)
	t.Logf("%d processes in %d cgroups and %d netns in %v: RSS %.1f MiB after a quarter, %.1f MiB at the end",
		nProcs, nCgroups, nNetNS, time.Since(start).Round(time.Second), rss1/(1<<20), rss2/(1<<20))
	caps := map[string]float64{}
	for _, m := range fams["eaddr_cache_capacity"].GetMetric() {
		caps[labels(m)["cache"]] = m.GetGauge().GetValue()
	}
	for _, m := range fams["eaddr_cache_entries"].GetMetric() {
		name, n := labels(m)["cache"], m.GetGauge().GetValue()
		t.Logf("cache %-16s %6.0f of %6.0f", name, n, caps[name])
		if n > caps[name] {
			t.Errorf("cache %s holds %.0f entries, over its bound %.0f", name, n, caps[name])
		}
	}
	if grow := rss2 - rss1; grow > 8<<20 {
		t.Errorf("RSS grew %.1f MiB over the last 15,000 processes: not flat", grow/(1<<20))
	}
	c := p.stop(t)
	t.Logf("totals %v", c)
	// The trace sees the whole node; --comm keeps the churn's events. The
	// kernel's lost counter cannot say whose events it lost, so none may be.
	if c["lost"] != 0 {
		t.Errorf("%d events lost with a %d MiB ring: the delivery check cannot be exact", c["lost"], soakRing>>20)
	}
	if c["delivered"]+c["suppressed"]+c["dropped"] != nProcs {
		t.Errorf("delivered %d + suppressed %d + dropped %d != %d failures", c["delivered"], c["suppressed"], c["dropped"], nProcs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	comm := filepath.Base(churn)
	for _, ev := range p.events {
		if ev.Process.Comm != comm {
			t.Fatalf("--comm %s let through %+v", comm, ev.Process)
		}
	}
	if len(p.events) != c["delivered"] {
		t.Errorf("%d events on stdout, %d delivered", len(p.events), c["delivered"])
	}
}

// soakRing is the soak's ring buffer: 32 MiB.
const soakRing = 32 << 20
