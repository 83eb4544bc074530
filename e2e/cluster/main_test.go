// Package cluster runs eaddr on the single-node cluster of internal/testing/kubecluster, as
// README and docs/kubernetes.md install it (kubectl apply -k, helm install), in deploy/.
package cluster

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/deploytest"
)

// TestMain runs the tests in deploy/, beside the manifests they test.
func TestMain(m *testing.M) { deploytest.Main(m) }
