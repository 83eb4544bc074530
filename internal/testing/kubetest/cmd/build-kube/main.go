// Command build-kube builds the Kubernetes binaries that internal/testing/kubetest
// runs (kubetest.Commands at kubetest.Version) into its cache, unless they are
// there already, and prints their paths, one a line: `make kube` builds them
// all, `make kube-apiserver` only that one. The tests build what they need
// themselves on first use; .ci/run calls this first so that the builds are
// not timed with the tests.
//
//	go run ./internal/testing/kubetest/cmd/build-kube [NAME...]
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

func main() {
	log.SetFlags(0)
	names := os.Args[1:]
	if len(names) == 0 {
		names = kubetest.Commands
	}
	begin := time.Now()
	bins, err := kubetest.Build(context.Background(), log.Printf, names...)
	if err != nil {
		log.Fatalf("building %v %s: %v", names, kubetest.Version, err)
	}
	fmt.Fprintf(os.Stderr, "%v %s ready (%s)\n", names, kubetest.Version, time.Since(begin).Round(time.Second))
	for _, b := range bins {
		fmt.Println(b)
	}
}
