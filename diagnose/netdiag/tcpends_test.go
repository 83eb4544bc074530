package netdiag

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// tcpEnds says how ns's TCP connections ended early, for a test whose
// connection is gone without the TIME_WAIT it waited for: every nonzero
// TcpExt counter of the netns (the test's own, so few are: TW counts the
// sockets that entered TIME_WAIT or FIN_WAIT2's; an abort on memory or on
// too many orphans resets both sides; a TIME_WAIT not made counts
// TCPTimeWaitOverflow; the others say which path sent or took a reset),
// its Tcp OutRsts, EstabResets, AttemptFails and InErrs, and sockstat's TCP
// line (its inuse and tw are the netns's, orphan and mem the machine's).
// The one failure with fewer counters printed (6.1 amd64 guest, two busy
// loops) showed TW=2 OutRsts=1 and one TIME_WAIT: a reset, from a path
// those counters did not name, ended one. What cannot be read is said.
func tcpEnds(t testing.TB, ns *netns.NS) string {
	t.Helper()
	var netstat, snmp, sockstat []byte
	err := ns.Do(func() (err error) {
		if netstat, err = os.ReadFile("/proc/thread-self/net/netstat"); err != nil {
			return err
		}
		if snmp, err = os.ReadFile("/proc/thread-self/net/snmp"); err != nil {
			return err
		}
		sockstat, err = os.ReadFile("/proc/thread-self/net/sockstat")
		return err
	})
	if err != nil {
		return fmt.Sprintf(" (TCP counters of %s not read: %v)", ns, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nTCP counters of %s:", ns)
	ext := procCounters(string(netstat), "TcpExt")
	for _, name := range slices.Sorted(maps.Keys(ext)) {
		if v := ext[name]; v != "0" {
			fmt.Fprintf(&b, " %s=%s", name, v)
		}
	}
	tcp := procCounters(string(snmp), "Tcp")
	fmt.Fprintf(&b, "; Tcp OutRsts=%s EstabResets=%s AttemptFails=%s InErrs=%s", tcp["OutRsts"], tcp["EstabResets"], tcp["AttemptFails"], tcp["InErrs"])
	for _, line := range strings.Split(string(sockstat), "\n") {
		if strings.HasPrefix(line, "TCP:") {
			fmt.Fprintf(&b, "; sockstat %s", line)
		}
	}
	return b.String()
}

// procCounters reads the counters of one row of /proc/net/netstat or snmp:
// a line of names after "prefix:", then a line of values.
func procCounters(text, prefix string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != prefix+":" || len(values) != len(names) || values[0] != prefix+":" {
			continue
		}
		for j := 1; j < len(names); j++ {
			out[names[j]] = values[j]
		}
		return out
	}
	return out
}

// tcpCounter is the Tcp counter name of ns's /proc/net/snmp.
func tcpCounter(t testing.TB, ns *netns.NS, name string) int {
	t.Helper()
	var snmp []byte
	if err := ns.Do(func() (err error) {
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatalf("read the TCP counters of %s: %v", ns, err)
	}
	v, err := strconv.Atoi(procCounters(string(snmp), "Tcp")[name])
	if err != nil {
		t.Fatalf("Tcp %s of %s: %v", name, ns, err)
	}
	return v
}
