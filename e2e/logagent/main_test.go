// Package logagent is the log agent tier of eaddr's end-to-end tests: eaddr's
// image under a real containerd writes its records where a node keeps pod
// logs, and the OpenTelemetry Collector with deploy/otelcol/eaddr.yaml hands
// each on typed (make test-logagent; docs/testing.md "The test tree").
package logagent

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

func TestMain(m *testing.M) { eaddrtest.Main(m) }
