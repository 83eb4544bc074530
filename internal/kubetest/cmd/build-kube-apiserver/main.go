// Command build-kube-apiserver builds the kube-apiserver that internal/kubetest
// runs (kubetest.Version) into its cache, unless it is there already, and
// prints its path: `make kube-apiserver`. The tests build it themselves on first
// use; .ci/run calls this first so that the build is not timed with the tests.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eaddr/eaddr/internal/kubetest"
)

func main() {
	log.SetFlags(0)
	begin := time.Now()
	bin, err := kubetest.BuildAPIServer(context.Background(), log.Printf)
	if err != nil {
		log.Fatalf("building kube-apiserver %s: %v", kubetest.Version, err)
	}
	fmt.Fprintf(os.Stderr, "kube-apiserver %s: %s (%s)\n", kubetest.Version, bin, time.Since(begin).Round(time.Second))
	fmt.Println(bin)
}
