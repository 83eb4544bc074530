// Package helmtest runs the real helm (Version, a v3 release) in tests: built
// from the Go module proxy with `go install helm.sh/helm/v3/cmd/helm@Version`
// into internal/testing/kubetest's cache directory, beside the Kubernetes binaries,
// once per machine. Helm runs with a HOME and Helm directories of its own, so
// nothing of the user's (repositories, plugins, a kubeconfig) changes what it
// does.
package helmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

// Version is the helm release the tests run: the newest v3 the module proxy
// served when it was pinned (`go list -m -versions helm.sh/helm/v3`).
const Version = "v3.22.0"

// Module is helm's Go module; its main package is Module + "/cmd/helm".
const Module = "helm.sh/helm/v3"

// kubeMinor is the Kubernetes minor of the k8s.io/client-go that helm
// Version requires (v0.37.0): `helm template` and `helm lint` take it as the
// cluster's version when no cluster is asked (.Capabilities.KubeVersion), as
// helm's own Makefile stamps it.
const kubeMinor = "37"

// BinaryPath is where helm Version is (or will be) cached.
func BinaryPath() string {
	return filepath.Join(kubetest.CacheDir(), "helm-"+Version)
}

// Binary returns the path of helm Version, building it first when it is not
// cached. It skips (testenv.Skip: a failure under EADDR_REQUIRE_BPF=1) when
// it is not cached and cannot be built here: no Go toolchain on PATH, or a
// cache directory this user cannot write (`make helm` as root builds it
// there). A failed build fails the test with the build log's tail.
func Binary(t testing.TB) string {
	t.Helper()
	return buildcache.Ensure(t, "helm "+Version, BinaryPath(), kubetest.CacheDir(), "make helm", func(ctx context.Context, logf func(string, ...any)) error {
		_, err := Build(ctx, logf)
		return err
	})
}

// Build builds helm Version into BinaryPath unless it is there, and returns
// its path. Builds are serialised by an flock on helm-build.lock in the cache
// directory, so test binaries running side by side build it once; the lock
// is not kubetest's, so helm builds while a Kubernetes binary does.
//
// helm's go.mod has no replace directive, so `go install MODULE@VERSION`
// takes it as released, with its own go.sum; GOBIN is a directory of the
// cache, and the binary is renamed into place when complete. The version
// stamps are those of helm's Makefile: `helm version` says Version.
func Build(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	dir, bin := kubetest.CacheDir(), BinaryPath()
	j := buildcache.Job{Dir: dir, Lock: "helm-build.lock", What: "helm " + Version, Bin: bin, LogPath: filepath.Join(dir, "build-helm-"+Version+".log")}
	return bin, buildcache.Build(ctx, j, logf, func(g *buildcache.Go, tmp string) error {
		gobin := filepath.Join(dir, "helm-gobin-"+Version)
		if err := os.RemoveAll(gobin); err != nil {
			return err
		}
		defer os.RemoveAll(gobin)
		if err := install(g, gobin); err != nil {
			return err
		}
		return os.Rename(filepath.Join(gobin, "helm"), tmp)
	})
}

// install runs go install of helm Version with GOBIN=gobin, outside any
// module (the working directory is the cache), so that a go.work or go.mod
// around the caller plays no part; its output goes to g's log.
func install(g *buildcache.Go, gobin string) error {
	args := []string{"install", "-trimpath", "-ldflags", ldflags(), Module + "/cmd/helm@" + Version}
	fmt.Fprintf(g.Log, "$ GOBIN=%s go %s\n", gobin, strings.Join(args, " "))
	cmd := exec.CommandContext(g.Ctx, g.Bin, args...)
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(),
		"GOBIN="+gobin, "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0", "GOTOOLCHAIN=local",
		"GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	cmd.Stdout, cmd.Stderr = g.Log, g.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go install %s/cmd/helm@%s: %w (log: %s)\n%s", Module, Version, err, g.LogPath, buildcache.Tail(g.LogPath, 30))
	}
	return nil
}

// ldflags are helm's Makefile's: the version `helm version` prints, and the
// Kubernetes version helm lint and helm template assume without a cluster.
func ldflags() string {
	var b strings.Builder
	b.WriteString("-s -w")
	b.WriteString(" -X " + Module + "/internal/version.version=" + Version)
	b.WriteString(" -X " + Module + "/internal/version.gitTreeState=clean")
	for _, pkg := range []string{"pkg/lint/rules", "pkg/chartutil"} {
		b.WriteString(" -X " + Module + "/" + pkg + ".k8sVersionMajor=1")
		b.WriteString(" -X " + Module + "/" + pkg + ".k8sVersionMinor=" + kubeMinor)
	}
	return b.String()
}
