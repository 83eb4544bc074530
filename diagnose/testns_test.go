package diagnose

import (
	"fmt"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// rangedNS is a throwaway netns whose range is lo-hi, closed at cleanup.
func rangedNS(t *testing.T, lo, hi int) *netns.NS {
	t.Helper()
	ns := testns.New(t)
	if err := ns.SetSysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, hi)); err != nil {
		t.Fatal(err)
	}
	return ns
}
