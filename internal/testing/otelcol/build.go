// Package otelcol builds and runs a minimal OpenTelemetry Collector, the
// log agent of eaddr's tests: the filelog receiver (with its container
// parser) reads eaddr's container log from a /var/log/pods layout, and the
// file exporter writes what it hands on as OTLP JSON, which Check compares,
// field for field, with the lines eaddr wrote.
//
// The collector is what the OpenTelemetry Collector Builder (ocb) would
// generate for these components: a wrapper module of a main.go and a
// components.go, built from the Go module proxy into CacheDir() once per
// machine, like internal/testing/kubetest's Kubernetes binaries.
package otelcol

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
)

// Version is the collector release: the core modules' v0.x (beta) line.
// StableVersion is the same release's v1.x line (component, confmap and its
// providers, pdata), and ContribVersion the contrib modules made against
// it. ocb v0.165.0 pairs them the same way (DefaultBetaOtelColVersion,
// DefaultStableOtelColVersion).
const (
	Version        = "v0.165.0"
	StableVersion  = "v1.71.0"
	ContribVersion = "v0.165.1"
)

// module is one Go module of the wrapper, at its version.
type module struct{ path, version string }

// Modules are the wrapper's direct requirements: the collector's command,
// its telemetry (ocb's default), the env and file config providers, the
// filelog receiver, and the file and debug exporters.
var Modules = []module{
	{"go.opentelemetry.io/collector/otelcol", Version},
	{"go.opentelemetry.io/collector/service", Version},
	{"go.opentelemetry.io/collector/confmap/provider/envprovider", StableVersion},
	{"go.opentelemetry.io/collector/confmap/provider/fileprovider", StableVersion},
	{"github.com/open-telemetry/opentelemetry-collector-contrib/receiver/filelogreceiver", ContribVersion},
	{"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter", ContribVersion},
	{"go.opentelemetry.io/collector/exporter/debugexporter", Version},
}

// CacheEnv names the environment variable that moves the cache directory
// away from DefaultCacheDir.
const CacheEnv = "EADDR_OTELCOL_CACHE"

// DefaultCacheDir holds the built collector, the wrapper module it is built
// from, the build logs and the lock that serialises builds.
const DefaultCacheDir = "/var/cache/eaddr-otelcol"

// CacheDir is $EADDR_OTELCOL_CACHE, or DefaultCacheDir.
func CacheDir() string { return buildcache.Dir(CacheEnv, DefaultCacheDir) }

// BinaryPath is where the collector is (or will be) cached: its name
// carries Version and a digest of the wrapper's sources, so that another
// choice of components or versions is another binary.
func BinaryPath() string {
	sum := sha256.New()
	for _, f := range wrapperFiles() {
		sum.Write(f.data)
	}
	sum.Write(requirements())
	return filepath.Join(CacheDir(), "eaddr-otelcol-"+Version+"-"+hex.EncodeToString(sum.Sum(nil))[:12])
}

// Binary returns the collector's path, building it first when it is not
// cached (2 min 36 s cold on 2 cores, 208 CPU seconds; 3 to 9 s with the
// Go caches warm; once per machine). It skips (testenv.Skip: a failure under
// EADDR_REQUIRE_BPF=1) when it is not cached and cannot be built here: no
// Go toolchain on PATH, or a cache directory this user cannot write. A
// failed build fails the test with the build log's tail.
func Binary(t testing.TB) string {
	t.Helper()
	return buildcache.Ensure(t, "the OpenTelemetry Collector "+Version, BinaryPath(), CacheDir(), "make otelcol", func(ctx context.Context, logf func(string, ...any)) error {
		_, err := Build(ctx, logf)
		return err
	})
}

// Build builds the collector into BinaryPath unless it is there, and
// returns that path. Builds are serialised by an flock on
// CacheDir()/build.lock, so test binaries running side by side build it
// once.
func Build(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	bin, dir := BinaryPath(), CacheDir()
	j := buildcache.Job{Dir: dir, Lock: "build.lock", What: "the OpenTelemetry Collector " + Version, Bin: bin, LogPath: bin + ".log", SrcDir: filepath.Join(dir, "src-"+Version)}
	return bin, buildcache.Build(ctx, j, logf, func(g *buildcache.Go, tmp string) error {
		b := &builder{*g}
		if err := b.wrapperModule(); err != nil {
			return err
		}
		_, err := b.Run("build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, ".")
		return err
	})
}

// builder runs the go commands of one build in the wrapper module (Dir).
type builder struct{ buildcache.Go }

// wrapperModule writes the wrapper's sources into b.Dir and, unless an
// earlier build left the same requirements (its stamp) and a go.sum, a
// fresh go.mod in which go get pins Modules (and writes go.sum). Not go mod
// tidy: it also resolves the tests of the modules' packages, and some of
// what they import is not on the proxy at the matching version
// (otlpencodingextension v0.165.1).
func (b *builder) wrapperModule() error {
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return err
	}
	for _, f := range wrapperFiles() {
		if err := os.WriteFile(filepath.Join(b.Dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	stampPath, stamp := filepath.Join(b.Dir, "requirements"), requirements()
	old, _ := os.ReadFile(stampPath)
	if _, err := os.Stat(filepath.Join(b.Dir, "go.sum")); err == nil && bytes.Equal(old, stamp) {
		fmt.Fprintf(b.Log, "# requirements unchanged, go.sum there: no go get\n")
		return nil
	}
	os.Remove(filepath.Join(b.Dir, "go.sum"))
	if err := os.WriteFile(filepath.Join(b.Dir, "go.mod"), goMod(), 0o644); err != nil {
		return err
	}
	args := []string{"get"}
	for _, m := range Modules {
		args = append(args, m.path+"@"+m.version)
	}
	if _, err := b.Run(args...); err != nil {
		return err
	}
	return os.WriteFile(stampPath, stamp, 0o644)
}
