package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/netns"
	"github.com/eaddr/eaddr/internal/testenv"
)

// The worst status sets the exit: a finding beats unknown, unknown beats
// clean, and nothing audited at all is unknown too.
func TestCheckStatus(t *testing.T) {
	ns := func(w ...severity) *checkReport {
		rep := &checkReport{}
		for _, s := range w {
			rep.NetNS = append(rep.NetNS, netnsReport{Worst: s})
			rep.Worst = max(rep.Worst, s)
		}
		return rep
	}
	for _, tc := range []struct {
		rep  *checkReport
		code int
		says string
	}{
		{ns(sevInfo, sevInfo), 0, ""},
		{ns(sevInfo, sevUnknown), 3, "1 of 2 network namespaces could not be audited"},
		{ns(sevUnknown, sevUnknown), 3, "none of the 2"},
		{ns(), 3, "no network namespace to audit"},
		{ns(sevUnknown, sevWarning), 1, ""},
		{ns(sevCritical, sevUnknown), 1, ""},
	} {
		err := checkStatus(tc.rep)
		code := 0
		switch {
		case errors.As(err, new(unknownError)):
			code = 3
		case errors.As(err, new(quietError)):
			code = 1
		case err != nil:
			code = -1
		}
		if code != tc.code || (tc.says != "" && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("worst %v over %d netns: %v (exit %d), want exit %d saying %q", tc.rep.Worst, len(tc.rep.NetNS), err, code, tc.code, tc.says)
		}
	}
}

// A real netns with no process left in it cannot be entered: check calls
// it unknown with why and exits 3, also beside a clean one; beside a
// critical one it exits 1.
func TestCheckUnknownNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	empty, err := netns.New() // held by this test's fd only: no process to enter it through
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { empty.Close() })
	emptyInode := strconv.FormatUint(empty.Inode(), 10)
	rep, code := runCheckJSON(t, "--netns", emptyInode)
	if code != 3 || rep.Worst != sevUnknown || len(rep.NetNS) != 1 || rep.NetNS[0].Worst != sevUnknown ||
		!strings.Contains(rep.NetNS[0].Error, "no live process") || !hasFinding(rep.NetNS[0], sevUnknown, "not audited") {
		t.Errorf("netns without a process: exit %d %+v, want exit 3 and unknown with why", code, rep)
	}
	_, errOut, _ := run(t, context.Background(), "check", "--netns", emptyInode)
	if !strings.Contains(errOut, "none of the 1 network namespaces could be audited") {
		t.Errorf("stderr %q does not say nothing was audited", errOut)
	}

	clean, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clean.Close() })
	sandbox(t, clean)
	if err := clean.SetSysctl("net.ipv4.ip_local_port_range", "40000 50001"); err != nil {
		t.Fatal(err)
	}
	cleanInode := strconv.FormatUint(clean.Inode(), 10)
	rep, code = runCheckJSON(t, "--netns", cleanInode)
	if code != 0 || rep.Worst > sevInfo {
		t.Fatalf("clean netns: exit %d %+v", code, rep)
	}
	rep, code = runCheckJSON(t, "--netns", cleanInode, "--netns", emptyInode)
	if code != 3 || rep.Worst != sevUnknown || len(rep.NetNS) != 2 {
		t.Errorf("clean and unknown netns: exit %d worst %v, want 3 and unknown", code, rep.Worst)
	}
	out, _, code := run(t, context.Background(), "check", "--netns", cleanInode, "--netns", emptyInode)
	if code != 3 || !strings.Contains(out, "UNKNOWN") || !strings.Contains(out, "worst: UNKNOWN") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}

	full := exhausted(t, "tcp4", "127.0.0.1")
	sandbox(t, full)
	rep, code = runCheckJSON(t, "--netns", strconv.FormatUint(full.Inode(), 10), "--netns", emptyInode)
	if code != 1 || rep.Worst != sevCritical {
		t.Errorf("critical and unknown netns: exit %d worst %v, want 1 and critical", code, rep.Worst)
	}
}
