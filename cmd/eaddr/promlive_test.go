package main

// This file runs a real Prometheus (Debian's, from the package that also
// gives promtool) for the alerts' live test (alerts_live_test.go): the
// shipped rules with their windows scaled down, scraping a running eaddr.
