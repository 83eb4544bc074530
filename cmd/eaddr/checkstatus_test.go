package main

import (
	"errors"
	"strings"
	"testing"
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
