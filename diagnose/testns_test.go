package diagnose

import (
	"fmt"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// testNS is a throwaway netns, closed at cleanup.
func testNS(t testing.TB) *netns.NS {
	t.Helper()
	testenv.RequireRoot(t)
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// rangedNS is a throwaway netns whose range is lo-hi, closed at cleanup.
func rangedNS(t *testing.T, lo, hi int) *netns.NS {
	t.Helper()
	ns := testNS(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)); err != nil {
		t.Fatal(err)
	}
	return ns
}
