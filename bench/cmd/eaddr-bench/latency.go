package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eaddr/eaddr/internal/mountinfo"
)

// The latency section (issue 22): how long after its failure an event's
// line reaches eaddr's stdout, at default flags, in a storm from a pod
// cgroup while the container runtime's socket accepts and never answers (a
// wedged runtime: the events of a container the runtime has not named wait
// for names), with the diagnosis on. It is a figure of the machine it runs
// on, not a bound: the bounds of eaddr's design (--names-wait,
// --diagnose-wait) are tested on a controlled clock (pipeline's
// TestNamesWait and TestDiagnoseWait), and eaddr's own record of them is
// reported beside it (names_wait_max_ms, diagnosis_wait_max_ms of its
// stopped line). TestAttributionWedgedRuntimeStorm asserted "every event
// within 1 s" until a loaded machine showed 1.5 s.

// latencyRound is one measurement.
type latencyRound struct {
	delays []time.Duration // failure (the event's time) to its line read from eaddr's stdout
	kv     map[string]string
	load   string // /proc/loadavg's first three fields, at the end
}

// lineTimer is eaddr's stdout: for each event line, how long after the
// failure it was read.
type lineTimer struct {
	mu     sync.Mutex
	part   []byte
	delays []time.Duration
}

func (l *lineTimer) Write(p []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		if at, ok := eventTime(l.part[:i]); ok {
			l.delays = append(l.delays, now.Sub(at))
		}
		l.part = l.part[i+1:]
	}
}

// eventTime is the "time" of a failure event line.
func eventTime(line []byte) (time.Time, bool) {
	const key = `"kind":"failure","time":"`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return at, err == nil
}

// latency runs -rounds latency rounds of -storm-time each.
func (b *bench) latency(ctx context.Context) error {
	for r := 0; r < b.o.rounds; r++ {
		lr, err := b.latencyOne(ctx)
		if err != nil {
			return fmt.Errorf("latency round %d: %w", r+1, err)
		}
		b.latencyRes = append(b.latencyRes, lr)
		d := lr.delays
		b.logf("latency round %d: %d events, failure to line median %v, max %v; eaddr: names_held=%s names_wait_max_ms=%s diagnosis_wait_max_ms=%s lost=%s; load %s",
			r+1, len(d), durQ(d, 0.5), durQ(d, 1), lr.kv["names_held"], lr.kv["names_wait_max_ms"], lr.kv["diagnosis_wait_max_ms"], lr.kv["lost"], lr.load)
	}
	return nil
}

// latencyOne is one round: a wedged CRI socket, a pod cgroup, eaddr at
// default flags naming that socket, and a generator (this program with
// -generate) in the pod cgroup for -storm-time.
func (b *bench) latencyOne(ctx context.Context) (*latencyRound, error) {
	dir, err := os.MkdirTemp("", "eaddr-bench-latency-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "wedged.sock")
	stopCRI, err := wedgedCRI(sock)
	if err != nil {
		return nil, err
	}
	defer stopCRI()
	leaf, removeCgroup, err := podCgroup()
	if err != nil {
		return nil, err
	}
	defer removeCgroup()
	lt := &lineTimer{}
	s, err := startEaddr(ctx, b.o.eaddr, []string{"trace", "--cri-endpoint", sock}, lt)
	if err != nil {
		return nil, err
	}
	genErr := b.latencyGenerate(ctx, leaf)
	t, stopErr := s.Stop()
	if genErr != nil {
		return nil, genErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	load, _ := os.ReadFile("/proc/loadavg")
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return &latencyRound{delays: lt.delays, kv: t.KV, load: strings.Join(strings.Fields(string(load) + " - - -")[:3], " ")}, nil
}

// latencyGenerate runs this program with -generate in a new process, moved
// into the pod cgroup leaf as soon as it starts.
func (b *bench) latencyGenerate(ctx context.Context, leaf string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-generate", "0", "-for", b.o.stormTime.String(), "-workers", "2", "-gobench=false")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("moving the generator into %s: %w", leaf, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("the generator: %w", err)
	}
	return nil
}

// wedgedCRI listens on sock, accepts and never answers.
func wedgedCRI(sock string) (stop func(), err error) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or written
			mu.Unlock()
		}
	}()
	return func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	}, nil
}

// podCgroup makes a kubepods-style cgroup (cgroupfs layout) under the
// cgroup2 mount; remove takes it away again.
func podCgroup() (leaf string, remove func(), err error) {
	mounts, err := mountinfo.Self()
	if err != nil {
		return "", nil, err
	}
	root := ""
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			root = m.MountPoint
			break
		}
	}
	if root == "" {
		return "", nil, fmt.Errorf("no cgroup2 mount")
	}
	r := rand.Uint64()
	top := filepath.Join(root, fmt.Sprintf("eaddr-bench-%x", r))
	uid := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r>>32, r>>16&0xffff, r&0xffff, rand.Uint32()&0xffff, rand.Uint64()&0xffffffffffff)
	leaf = filepath.Join(top, "kubepods", "besteffort", "pod"+uid, fmt.Sprintf("%016x%016x%016x%016x", rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()))
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return "", nil, err
	}
	return leaf, func() {
		for d := leaf; strings.HasPrefix(d, top); d = filepath.Dir(d) {
			for i := 0; i < 100 && os.Remove(d) != nil; i++ {
				time.Sleep(50 * time.Millisecond) // a just-reaped task may hold it a moment
			}
		}
	}, nil
}

// durQ is the q-quantile of d (0: smallest, 1: largest), the nearest rank;
// 0 when empty.
func durQ(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s)-1)+0.5))]
}

func (b *bench) reportLatency(w io.Writer) {
	fmt.Fprintf(w, "\nlatency (issue 22): %s trace at default flags, a CRI socket that accepts and never answers, 2 threads failing connect() flat out from a pod cgroup for %v; %d rounds; failure (the event's time) to its line on eaddr's stdout:\n",
		b.o.eaddr, b.o.stormTime, len(b.latencyRes))
	for i, lr := range b.latencyRes {
		d := lr.delays
		fmt.Fprintf(w, "  round %d: %d events: median %v, p99 %v, max %v; eaddr's own record: %s events waited for names, the longest %s ms; the longest snapshot wait %s ms; lost %s; load %s\n",
			i+1, len(d), durQ(d, 0.5).Round(time.Millisecond), durQ(d, 0.99).Round(time.Millisecond), durQ(d, 1).Round(time.Millisecond),
			orDash(lr.kv["names_held"]), orDash(lr.kv["names_wait_max_ms"]), orDash(lr.kv["diagnosis_wait_max_ms"]), orDash(lr.kv["lost"]), lr.load)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
