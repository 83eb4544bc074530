package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime is utime and stime of process pid (all its threads) from /proc/PID/stat.
func cpuTime(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// comm, field 2, is in parentheses and may hold spaces: fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut) * time.Second / clockTicks, time.Duration(st) * time.Second / clockTicks, nil
}

// vmHWM is the peak resident set size of pid in bytes (VmHWM in /proc/PID/status).
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return 0, err
				}
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// cpuBusy is a sample of the first line of /proc/stat.
type cpuBusy struct{ busy, total uint64 }

func readCPUBusy() (cpuBusy, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuBusy{}, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return cpuBusy{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var s cpuBusy
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i == 8 || i == 9 { // guest, guest_nice: already in user, nice
			continue
		}
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s, nil
}

// since is the busy share of all CPUs between a and s.
func (s cpuBusy) since(a cpuBusy) float64 {
	if s.total <= a.total {
		return 0
	}
	return float64(s.busy-a.busy) / float64(s.total-a.total)
}

// foreignTracers lists BPF tracing programs loaded on this host (tracepoint,
// raw tracepoint, kprobe, fentry/fexit...) as "name(type)". Called between
// configurations, when this driver has none loaded, it tells whether another
// tracer (a syscall tracepoint program makes every syscall take the slow
// path) was running during the measurement.
func foreignTracers(own map[ebpf.ProgramID]bool) ([]string, error) {
	var out []string
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return out, nil
			}
			return out, err
		}
		id = next
		if own[id] {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			continue
		}
		switch info.Type {
		case ebpf.TracePoint, ebpf.RawTracepoint, ebpf.RawTracepointWritable, ebpf.Kprobe, ebpf.Tracing, ebpf.PerfEvent:
			out = append(out, fmt.Sprintf("%s(%s)", info.Name, info.Type))
		}
	}
}

func numCPU() int { return runtime.NumCPU() }

// bpfObjects lists the BPF programs and maps process pid holds open, from
// /proc/PID/fdinfo (prog_id: and map_id: lines; link fds name their program too).
func bpfObjects(pid int) (progs []ebpf.ProgramID, maps []ebpf.MapID, err error) {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	seenP := map[ebpf.ProgramID]bool{}
	seenM := map[ebpf.MapID]bool{}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				continue
			}
			switch k {
			case "prog_id":
				if id := ebpf.ProgramID(n); !seenP[id] {
					seenP[id] = true
					progs = append(progs, id)
				}
			case "map_id":
				if id := ebpf.MapID(n); !seenM[id] {
					seenM[id] = true
					maps = append(maps, id)
				}
			}
		}
	}
	return progs, maps, nil
}

// lostReader returns a function reading eaddr's kernel-side drop counter (the
// per-CPU array map "lost" of process pid), or nil when there is none.
func lostReader(pid int) func() uint64 {
	_, maps, err := bpfObjects(pid)
	if err != nil {
		return nil
	}
	for _, id := range maps {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		info, err := m.Info()
		if err != nil || info.Name != "lost" || info.Type != ebpf.PerCPUArray {
			m.Close()
			continue
		}
		return func() uint64 {
			var v []uint64
			if err := m.Lookup(uint32(0), &v); err != nil {
				return 0
			}
			var sum uint64
			for _, x := range v {
				sum += x
			}
			return sum
		}
	}
	return nil
}

// progRun is the summed run count and run time of some BPF programs
// (kernel.bpf_stats_enabled must be on for them to count).
type progRun struct {
	runs uint64
	time time.Duration
}

func readProgRun(progs []*ebpf.Program) progRun {
	var r progRun
	for _, p := range progs {
		if st, err := p.Stats(); err == nil {
			r.runs += st.RunCount
			r.time += st.Runtime
		}
	}
	return r
}

// openProgs opens the tracing programs among ids.
func openProgs(ids []ebpf.ProgramID) []*ebpf.Program {
	var out []*ebpf.Program
	for _, id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err != nil || (info.Type != ebpf.TracePoint && info.Type != ebpf.RawTracepoint && info.Type != ebpf.Kprobe) {
			p.Close()
			continue
		}
		out = append(out, p)
	}
	return out
}
