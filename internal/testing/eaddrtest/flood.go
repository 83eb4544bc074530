package eaddrtest

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
)

// Flood makes n failing connects toward 127.0.0.1:8080 from one process in
// ns and returns its pid; it takes as long as the machine needs.
func Flood(t *testing.T, ns *netns.NS, n int) int {
	t.Helper()
	pid, _ := RunLong(t, ns, Python(t), "-c", fmt.Sprintf(`import socket
for i in range(%d):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", 8080))
    except OSError:
        pass
    s.close()
`, n))
	return pid
}

// Totals parses the "stopped" line of a finished trace.
func Totals(t *testing.T, stderr string) map[string]int {
	t.Helper()
	line := stoppedLine(stderr)
	if line == "" {
		t.Fatalf("no totals in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(` ([a-z_]+)=([0-9]+)`).FindAllStringSubmatch(line, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// bindFloodScript moves the python process into the cgroup argv[1], then fails
// bind() with EADDRNOTAVAIL argv[2] times, toward a new address each time
// in 198.18.0.0/15 (RFC 2544, on no interface): every failure a rate limit
// key of its own, as bind() on random non-local addresses makes them.
const bindFloodScript = `import os, socket, sys
open(sys.argv[1] + "/cgroup.procs", "w").write(str(os.getpid()))
for i in range(int(sys.argv[2])):
    s = socket.socket()
    try:
        s.bind(("198.%d.%d.%d" % (18 + (i >> 16), (i >> 8) & 255, i & 255), 4242))
        sys.exit("bind succeeded")
    except OSError as e:
        if e.errno != 99:
            raise
    s.close()
`

// FloodBind runs bindFloodScript in ns and cgroup leaf for n failures, each
// toward an address of its own; it returns the process's pid once it has
// exited.
func FloodBind(t *testing.T, ns *netns.NS, leaf string, n int) int {
	t.Helper()
	cmd := exec.Command(Python(t), "-c", bindFloodScript, leaf, strconv.Itoa(n))
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	return cmd.Process.Pid
}
