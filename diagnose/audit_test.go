package diagnose

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/eaddr/eaddr/diagnose/netdiag"
	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// Unknown ranks above the clean severities and below the findings, and
// reads back from its name.
func TestSeverityUnknownOrder(t *testing.T) {
	if !(SevOK < SevInfo && SevInfo < SevUnknown && SevUnknown < SevWarning && SevWarning < SevCritical) {
		t.Errorf("order ok %d info %d unknown %d warning %d critical %d", SevOK, SevInfo, SevUnknown, SevWarning, SevCritical)
	}
	for s := SevOK; s <= SevCritical; s++ {
		var back Severity
		if err := back.UnmarshalText([]byte(s.String())); err != nil || back != s {
			t.Errorf("%v: read back as %v, %v", s, back, err)
		}
	}
	if SevUnknown.String() != "unknown" {
		t.Errorf("SevUnknown is %q", SevUnknown)
	}
}

// A netns that cannot be entered (its last process exited before the
// audit got to it) is unknown, with why, never ok; the real one eaddr
// runs in is audited.
func TestAuditUnknownWhenNotEntered(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	gone := func(inode uint64, pid int) (*netdiag.Netns, error) {
		return nil, fmt.Errorf("netdiag: OpenNetns net:[%d]: %w", inode, netdiag.ErrNoProcess)
	}
	r := AuditNetNS(st.Ino, os.Getpid(), AuditOptions{Open: gone, NodePortLo: 30000, NodePortHi: 32767, Warn: 70, Crit: 90, Top: 3, Findings: true})
	if r.Worst != SevUnknown || !strings.Contains(r.Error, "no live process") || len(r.Findings) != 1 ||
		!strings.Contains(r.Findings[0].Message, "not audited") {
		t.Errorf("netns not entered: worst %v, error %q, findings %+v; want unknown, with why", r.Worst, r.Error, r.Findings)
	}

	testenv.RequireRoot(t)
	r = AuditNetNS(st.Ino, os.Getpid(), AuditOptions{NodePortLo: 30000, NodePortHi: 32767, Warn: 70, Crit: 90, Top: 3, Findings: true})
	if r.Worst == SevUnknown || r.Error != "" || r.PortRange == "" {
		t.Errorf("own netns: worst %v, error %q, range %q; want it audited", r.Worst, r.Error, r.PortRange)
	}
}
