// Command build-helm builds the helm that internal/testing/helmtest runs
// (helmtest.Version, from the Go module proxy) into internal/testing/kubetest's cache,
// unless it is there already, and prints its path: `make helm`. The tests
// build it themselves on first use; this does it up front, so that the build
// is not timed with the tests.
//
//	go run ./internal/testing/helmtest/cmd/build-helm
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eaddr/eaddr/internal/testing/helmtest"
)

func main() {
	log.SetFlags(0)
	begin := time.Now()
	bin, err := helmtest.Build(context.Background(), log.Printf)
	if err != nil {
		log.Fatalf("building helm %s: %v", helmtest.Version, err)
	}
	fmt.Fprintf(os.Stderr, "helm %s ready (%s)\n", helmtest.Version, time.Since(begin).Round(time.Second))
	fmt.Println(bin)
}
