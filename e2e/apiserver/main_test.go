package apiserver

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/deploytest"
)

// TestMain runs the tests in deploy/, beside the manifests they test.
func TestMain(m *testing.M) { deploytest.Main(m) }
