package pipeline

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eaddr/eaddr/decode"
	"github.com/eaddr/eaddr/diagnose"
	"github.com/eaddr/eaddr/ports"
)

// With --metrics-no-destination a scrape of /metrics names no destination:
// each netns has one in-use series, its busiest destination's, which
// follows the destinations behind it up and down (a diagnosis toward a
// busier one, a sample where it left the top); a bind() diagnosis's
// series, which names none, stays as it is, until a sample removes it as
// it does without the flag.
func TestMetricsNoDestination(t *testing.T) {
	m := newMetrics(100, 100, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.serve(ctx, "127.0.0.1:0", defaultServerLimits, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sample := &ports.Sample{NetNS: []diagnose.NetNSReport{
		{Inode: 1, Host: true, Usable: 100, Destinations: dests(30, 20)},
		{Inode: 2, Pod: &diagnose.CheckPod{Namespace: "ns", Name: "web"}, Usable: 50, Destinations: dests(5)}}}
	m.port.sampled(sample, 0)
	bind := &decode.Event{Syscall: decode.Bind, NetNS: 2, Pod: &decode.Pod{Namespace: "ns", Name: "web"}}
	m.port.diagnosed(bind, &diagnose.Diagnosis{Counted: true, Usable: 50, InUse: 7})
	want := []string{
		`eaddr_ephemeral_ports_in_use{destination="the busiest destination",namespace="",netns="1",pod=""} 30`,
		`eaddr_ephemeral_ports_in_use{destination="the busiest destination",namespace="ns",netns="2",pod="web"} 5`,
		`eaddr_ephemeral_ports_in_use{destination="",namespace="ns",netns="2",pod="web"} 7`,
	}
	inUse(t, addr, want...)

	connect := &decode.Event{Syscall: decode.Connect, NetNS: 1}
	connect.Remote.IP = netip.MustParseAddrPort("10.0.0.9:443")
	m.port.diagnosed(connect, &diagnose.Diagnosis{Counted: true, Usable: 100, InUse: 40})
	want[0] = strings.Replace(want[0], "} 30", "} 40", 1)
	inUse(t, addr, want...)

	m.port.sampled(sample, 0) // 10.0.0.9:443 and the bind()'s are out of the top again
	want[0] = strings.Replace(want[0], "} 40", "} 30", 1)
	inUse(t, addr, want[:2]...)
}

// inUse scrapes /metrics at addr: its eaddr_ephemeral_ports_in_use
// series must be want, and nothing in it may name an address of dests.
func inUse(t *testing.T, addr string, want ...string) {
	t.Helper()
	c, err := dialFrom("127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(patience))
	_, body, err := get(c, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "eaddr_ephemeral_ports_in_use{") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(sorted(want), "\n") {
		t.Errorf("in-use series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sorted(want), "\n"))
	}
	if strings.Contains(body, "10.0.0.") {
		t.Errorf("a destination is in /metrics:\n%s", body)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}
