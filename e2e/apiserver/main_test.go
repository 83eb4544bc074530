// Package apiserver is the API server tier of eaddr's end-to-end tests: deploy/'s
// manifests decoded strictly, built by kubectl kustomize, rendered by helm, the
// alert rules by promtool and applied to a real kube-apiserver, and eaddr trace's
// Events read back from one (make test-apiserver; docs/testing.md "The test tree").
package apiserver

import (
	"os"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/deploytest"
	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

// TestMain runs the tests in deploy/, beside the manifests they test, with
// eaddr built for the ones that run it.
func TestMain(m *testing.M) {
	deploytest.Chdir()
	os.Exit(eaddrtest.RunWithBinary(m))
}
