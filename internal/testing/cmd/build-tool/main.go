// Command build-tool builds a tool the tests run from the Go module proxy into
// its cache, unless it is there already, and prints its paths, one a line:
//
//	go run ./internal/testing/cmd/build-tool helm            # make helm: helmtest.Version
//	go run ./internal/testing/cmd/build-tool otelcol         # make otelcol: otelcol.Version
//	go run ./internal/testing/cmd/build-tool kube [NAME...]  # make kube: kubetest.Commands, or NAMEs
//
// The tests build what they need themselves on first use; .ci/run calls this
// first, so that the builds are not timed with the tests.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eaddr/eaddr/internal/testing/helmtest"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
	"github.com/eaddr/eaddr/internal/testing/otelcol"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("usage: build-tool helm | otelcol | kube [NAME...]")
	}
	ctx, tool, names := context.Background(), os.Args[1], os.Args[2:]
	var bins []string
	var version string
	var err error
	begin := time.Now()
	switch {
	case tool == "helm" && len(names) == 0:
		version = helmtest.Version
		bins = make([]string, 1)
		bins[0], err = helmtest.Build(ctx, log.Printf)
	case tool == "otelcol" && len(names) == 0:
		version = otelcol.Version
		bins = make([]string, 1)
		bins[0], err = otelcol.Build(ctx, log.Printf)
	case tool == "kube":
		if len(names) == 0 {
			names = kubetest.Commands
		}
		tool, version = fmt.Sprint(names), kubetest.Version
		bins, err = kubetest.Build(ctx, log.Printf, names...)
	default:
		log.Fatalf("build-tool %v: want helm, otelcol, or kube [NAME...]", os.Args[1:])
	}
	if err != nil {
		log.Fatalf("building %s %s: %v", tool, version, err)
	}
	fmt.Fprintf(os.Stderr, "%s %s ready (%s)\n", tool, version, time.Since(begin).Round(time.Second))
	for _, b := range bins {
		fmt.Println(b)
	}
}
