package nodeport

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The same conntrack figures from /proc, for a process without
// CAP_NET_ADMIN, which CTNETLINK refuses (nfnetlink checks it for every
// message): /proc/net/stat/nf_conntrack, one line of hex counters per CPU
// under a header naming them, and the net.netfilter sysctls. Both are read
// through /proc/thread-self and /proc/sys, which show the calling thread's
// netns (internal/netns's Do enters it on a locked thread).

// Where the counters came from (ConntrackCounters.Source).
const (
	SourceCTNetlink = "ctnetlink"
	SourceProcStat  = "/proc/net/stat/nf_conntrack"
)

var procStatPath = "/proc/thread-self/net/stat/nf_conntrack"

// readCountersProc sums the per-CPU lines of /proc/net/stat/nf_conntrack.
func readCountersProc() (ConntrackCounters, error) {
	s := ConntrackCounters{Source: SourceProcStat}
	f, err := os.Open(procStatPath)
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return s, fmt.Errorf("%s: no header", procStatPath)
	}
	cols := strings.Fields(sc.Text())
	for sc.Scan() {
		for i, v := range strings.Fields(sc.Text()) {
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil || i >= len(cols) {
				return s, fmt.Errorf("%s: line %q", procStatPath, sc.Text())
			}
			switch cols[i] {
			case "insert_failed":
				s.InsertFailed += n
			case "drop":
				s.Drop += n
			case "early_drop":
				s.EarlyDrop += n
			case "clashres":
				s.ClashResolve += n
			}
		}
		s.CPUs++
	}
	return s, sc.Err()
}

// useProc reads nf_conntrack_count and nf_conntrack_max.
func useProc() (count, max uint64, err error) {
	read := func(name string) (uint64, error) {
		b, err := os.ReadFile("/proc/sys/net/netfilter/" + name)
		if err != nil {
			return 0, err
		}
		return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if count, err = read("nf_conntrack_count"); err != nil {
		return 0, 0, err
	}
	max, err = read("nf_conntrack_max")
	return count, max, err
}

// refused: CTNETLINK said no for want of CAP_NET_ADMIN.
func refused(err error) bool { return errors.Is(err, unix.EPERM) }
