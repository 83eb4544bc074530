// Command build-otelcol builds the OpenTelemetry Collector that
// internal/testing/otelcol runs into its cache, unless it is there already, and
// prints its path (`make otelcol`). The tests build it themselves on first
// use; this does it up front, so that the build is not timed with them.
//
//	go run ./internal/testing/otelcol/cmd/build-otelcol
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eaddr/eaddr/internal/testing/otelcol"
)

func main() {
	log.SetFlags(0)
	begin := time.Now()
	bin, err := otelcol.Build(context.Background(), log.Printf)
	if err != nil {
		log.Fatalf("building the OpenTelemetry Collector %s: %v", otelcol.Version, err)
	}
	fmt.Fprintf(os.Stderr, "OpenTelemetry Collector %s ready (%s)\n", otelcol.Version, time.Since(begin).Round(time.Second))
	fmt.Println(bin)
}
