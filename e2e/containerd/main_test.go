// Package containerd is the containerd tier of eaddr's end-to-end tests: eaddr
// trace names the pod, container and image of a failure in pods a real
// containerd runs over CRI (internal/testing/critest), writes their Events and
// runs as the image the DaemonSet ships (make test-containerd; docs/testing.md
// "The test tree"). They need root and containerd.
package containerd

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

func TestMain(m *testing.M) { eaddrtest.Main(m) }
