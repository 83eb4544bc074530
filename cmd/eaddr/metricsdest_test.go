package main

import "testing"

// --metrics-no-destination reaches the pipeline's config; without it the
// port series keep their destinations.
func TestMetricsNoDestinationFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--metrics-no-destination"}, true},
	} {
		c, err := traceConfigOf(tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if c.MetricsNoDestination != tc.want {
			t.Errorf("%q: MetricsNoDestination %v, want %v", tc.args, c.MetricsNoDestination, tc.want)
		}
	}
}
