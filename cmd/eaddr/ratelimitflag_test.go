package main

import (
	"errors"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// --rate-limit-cgroup is 10 times --rate-limit unless given: off with it,
// and refused with a rate when --rate-limit is off (every failure an
// event, as --rate-limit off has always meant).
func TestRateLimitCgroupFlag(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		rate, want float64
		err        string
	}{
		{nil, 100, 1000, ""},
		{[]string{"--rate-limit", "50/s"}, 50, 500, ""},
		{[]string{"--rate-limit", "50/s", "--rate-limit-cgroup", "2x"}, 50, 100, ""},
		{[]string{"--rate-limit-cgroup", "20/s"}, 100, 20, ""},
		{[]string{"--rate-limit-cgroup", "off"}, 100, 0, ""},
		{[]string{"--rate-limit", "off"}, 0, 0, ""},
		{[]string{"--rate-limit", "off", "--rate-limit-cgroup", "5/s"}, 0, 0, "--rate-limit-cgroup: 5/s works with --rate-limit, which is off"},
		{[]string{"--rate-limit-cgroup", "-1x"}, 0, 0, `--rate-limit-cgroup: "-1x" is not a multiple of --rate-limit such as 10x`},
	} {
		c, err := traceConfigOf(append(tc.args, "--cri-endpoint", eaddrtest.DeadSocket(t))...)
		if tc.err != "" {
			var u usageError
			if !errors.As(err, &u) || err.Error() != tc.err {
				t.Errorf("%q: %v, want the usage error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || c.Rate != tc.rate || c.CgroupRate != tc.want {
			t.Errorf("%q: rate %v, cgroup rate %v, %v; want %v and %v", tc.args, c.Rate, c.CgroupRate, err, tc.rate, tc.want)
		}
	}
}
