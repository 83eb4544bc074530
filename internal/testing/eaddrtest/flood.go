package eaddrtest

import (
	"fmt"
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
	var line string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "msg=stopped") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no totals in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(` ([a-z_]+)=([0-9]+)`).FindAllStringSubmatch(line, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}
