package kernel

import (
	"testing"

	"github.com/eaddr/eaddr/internal/testing/eaddrtest"
)

func TestMain(m *testing.M) { eaddrtest.Main(m) }
