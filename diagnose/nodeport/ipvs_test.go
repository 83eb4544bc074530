package nodeport

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
	"github.com/eaddr/eaddr/internal/testing/testns"
)

// TestIPVSNotLoaded: on a kernel without the IPVS family, the source says
// the module is not loaded and the other sources are still read.
func TestIPVSNotLoaded(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("ip_vs is loaded on this kernel: testdata/kernels/ipvsreply's TestIPVSNodePorts covers it")
	}
	tab := readIn(t, testns.New(t))
	s := source(t, tab, ModeIPVS)
	if !errors.Is(s.Err, errNoIPVS) || !strings.Contains(s.Err.Error(), "module not loaded") {
		t.Errorf("ipvs source %+v, want the error %q", s, errNoIPVS)
	}
	if s := source(t, tab, ModeNftables); s.Err != nil {
		t.Errorf("nftables source %+v, want read", s)
	}
}
