// Package kernel is the kernel tier of eaddr's end-to-end tests: eaddr trace,
// check, top and demo run as a user runs them, against real failures on this
// kernel (network namespaces, cgroups, real clients), no containerd (make
// test-kernel; docs/testing.md "The test tree"). They need root.
package kernel

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

func TestMain(m *testing.M) { eaddrtest.Main(m) }
