// Package pipeline is the trace loop that `trace` and `demo` share (Run): it
// reads the ring, decodes and attributes each failure, holds it for its
// names and its diagnosis within their bounded waits, applies the filters
// and the rate limit's accounting, and hands it to the writer, Kubernetes
// Events, summaries and metrics. It returns the run's named totals (Stats).
package pipeline
