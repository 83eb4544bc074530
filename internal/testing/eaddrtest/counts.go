package eaddrtest

import (
	"testing"
)

// ScrapeSums is each family's values summed over its series.
func ScrapeSums(t *testing.T, base string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, f := range Scrape(t, base) {
		for _, m := range f.GetMetric() {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
