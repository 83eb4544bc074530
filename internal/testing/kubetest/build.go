package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
)

// Version is the Kubernetes release whose binaries the tests run. Its
// staging modules (k8s.io/api, k8s.io/apiserver, ...) are the matching v0.x.y.
const Version = "v1.34.2"

// Commands are the Kubernetes binaries the tests can run, each built from
// k8s.io/kubernetes/cmd/NAME at Version into CacheDir. The first two serve the
// API server tier; the rest run a node for the cluster tier. The wrapper module
// imports them all, so its go.sum covers every one.
var Commands = []string{
	"kube-apiserver",
	"kubectl",
	"kube-controller-manager",
	"kube-scheduler",
	"kubelet",
	"kube-proxy",
}

// CacheEnv names the environment variable that moves the cache directory away
// from DefaultCacheDir.
const CacheEnv = "EADDR_KUBE_CACHE"

// DefaultCacheDir holds the built binaries, the wrapper module they are built
// from, their build logs and the lock that serialises builds.
const DefaultCacheDir = "/var/cache/eaddr-kube"

// CacheDir is $EADDR_KUBE_CACHE, or DefaultCacheDir.
func CacheDir() string { return buildcache.Dir(CacheEnv, DefaultCacheDir) }

// BinaryPath is where the command name (one of Commands) of Version is (or
// will be) cached.
func BinaryPath(name string) string {
	return filepath.Join(CacheDir(), name+"-"+Version)
}

// APIServerBinary is Binary(t, "kube-apiserver").
func APIServerBinary(t testing.TB) string {
	t.Helper()
	return Binary(t, "kube-apiserver")
}

// KubectlBinary is Binary(t, "kubectl"): the real kubectl of Version, never
// the one on PATH (which may be another version, or google-cloud-sdk's
// dispatcher).
func KubectlBinary(t testing.TB) string {
	t.Helper()
	return Binary(t, "kubectl")
}

// Binary returns the path of the command name of Version, building it first
// when it is not cached (kube-apiserver about 8 minutes on 2 cores, kubectl
// about 2 more, once per machine). It skips (testenv.Skip: a failure under
// EADDR_REQUIRE_BPF=1) when the binary is not cached and cannot be built
// here: no Go toolchain on PATH, or a cache directory this user cannot
// write (`make kube` as root builds it there); a failed build fails the
// test with the build log's tail.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return buildcache.Ensure(t, name+" "+Version, BinaryPath(name), CacheDir(), "make kube", func(ctx context.Context, logf func(string, ...any)) error {
		_, err := Build(ctx, logf, name)
		return err
	})
}

// Build builds each of the named Commands (all of them when none is named)
// that is not cached yet into BinaryPath, and returns their paths in the
// order asked. Builds are serialised by an flock on CacheDir()/build.lock, so
// test binaries running side by side build each once.
//
// `go install k8s.io/kubernetes/cmd/kube-apiserver@v1.x.y` is refused because
// k8s.io/kubernetes's go.mod replaces its staging modules with ./staging/...
// paths. So a wrapper module in CacheDir()/src-<Version> requires
// k8s.io/kubernetes and replaces each of those staging modules with its
// published v0.x.y; the list is read from k8s.io/kubernetes's own go.mod.
func Build(ctx context.Context, logf func(format string, args ...any), names ...string) ([]string, error) {
	if len(names) == 0 {
		names = Commands
	}
	for _, n := range names {
		if !slices.Contains(Commands, n) {
			return nil, fmt.Errorf("%q is not one of kubetest.Commands %q", n, Commands)
		}
	}
	var bins []string
	for _, name := range names {
		bin := BinaryPath(name)
		bins = append(bins, bin)
		if err := buildOne(ctx, logf, name, bin); err != nil {
			return nil, err
		}
	}
	return bins, nil
}

// buildOne builds the command name into bin in the wrapper module, unless
// it is there, with its own log in CacheDir().
func buildOne(ctx context.Context, logf func(format string, args ...any), name, bin string) error {
	dir := CacheDir()
	j := buildcache.Job{Dir: dir, Lock: "build.lock", What: name + " " + Version, Bin: bin,
		LogPath: filepath.Join(dir, "build-"+name+"-"+Version+".log"), SrcDir: filepath.Join(dir, "src-"+Version)}
	return buildcache.Build(ctx, j, logf, func(g *buildcache.Go, tmp string) error {
		logf("kube-apiserver takes about 8 minutes on 2 cores, kubectl about 2 more")
		b := &builder{*g}
		if err := b.wrapperModule(); err != nil {
			return err
		}
		return b.build(name, tmp)
	})
}

// builder runs the go commands of one build in the wrapper module (Dir).
type builder struct{ buildcache.Go }

// wrapperModule writes the wrapper's go.mod (k8s.io/kubernetes and its
// staging modules at their published versions), a tools.go that imports
// every one of Commands, and go.sum (go mod tidy, skipped when go.mod and
// tools.go are what an earlier build left with its go.sum).
func (b *builder) wrapperModule() error {
	modPath, toolsPath, sumPath := filepath.Join(b.Dir, "go.mod"), filepath.Join(b.Dir, "tools.go"), filepath.Join(b.Dir, "go.sum")
	oldMod, _ := os.ReadFile(modPath)
	oldTools, _ := os.ReadFile(toolsPath)
	// A first go.mod so that `go mod download` runs inside the module.
	if err := os.WriteFile(modPath, []byte("module eaddr.local/kube\n"), 0o644); err != nil {
		return err
	}
	out, err := b.Run("mod", "download", "-json", "k8s.io/kubernetes@"+Version)
	if err != nil {
		return err
	}
	var dl struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &dl); err != nil {
		return fmt.Errorf("go mod download k8s.io/kubernetes@%s: %w", Version, err)
	}
	if dl.Error != "" {
		return fmt.Errorf("go mod download k8s.io/kubernetes@%s: %s", Version, dl.Error)
	}
	upstream, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	gomod, err := wrapperGoMod(upstream, Version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(modPath, gomod, 0o644); err != nil {
		return err
	}
	// tidy keeps the requirement (and writes go.sum) only if a file imports it.
	tools := toolsGo(Commands)
	if err := os.WriteFile(toolsPath, tools, 0o644); err != nil {
		return err
	}
	if _, err := os.Stat(sumPath); err == nil && bytes.Equal(oldMod, gomod) && bytes.Equal(oldTools, tools) {
		fmt.Fprintf(b.Log, "# go.mod and tools.go unchanged, go.sum there: no go mod tidy\n")
		return nil
	}
	_, err = b.Run("mod", "tidy")
	return err
}

// toolsGo is the wrapper's tools.go: a blank import of each command's main
// package, so that go mod tidy keeps what they need.
func toolsGo(commands []string) []byte {
	var b strings.Builder
	b.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t_ %q\n", commandPackage(c))
	}
	b.WriteString(")\n")
	return []byte(b.String())
}

// commandPackage is the main package of command name in k8s.io/kubernetes.
func commandPackage(name string) string { return "k8s.io/kubernetes/cmd/" + name }

// build compiles the command name to out with
// the version stamps a release carries (kube-apiserver's /version and
// `kubectl version --client` say Version).
func (b *builder) build(name, out string) error {
	minor := strings.SplitN(strings.TrimPrefix(Version, "v"), ".", 3)
	var ldflags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags = append(ldflags,
			"-X "+pkg+".gitVersion="+Version,
			"-X "+pkg+".gitMajor="+minor[0],
			"-X "+pkg+".gitMinor="+minor[1],
			"-X "+pkg+".gitTreeState=clean")
	}
	_, err := b.Run("build", "-trimpath", "-ldflags", "-s -w "+strings.Join(ldflags, " "), "-o", out, commandPackage(name))
	return err
}

// stagingReplace matches `k8s.io/NAME => ./staging/src/k8s.io/NAME` in
// k8s.io/kubernetes's go.mod.
var stagingReplace = regexp.MustCompile(`(?m)^\s*(?:replace\s+)?(k8s\.io/[A-Za-z0-9._-]+)\s*=>\s*\./staging/`)

// wrapperGoMod writes the wrapper module's go.mod from k8s.io/kubernetes's:
// the same go and godebug lines (they set the binary's GODEBUG defaults),
// a requirement of k8s.io/kubernetes, and for each staging module a replace
// with its published v0 version.
func wrapperGoMod(upstream []byte, version string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Generated by eaddr's internal/testing/kubetest: builds " + strings.Join(Commands, ", ") + " " + version + ".\n")
	b.WriteString("module eaddr.local/kube\n\n")
	for _, line := range strings.Split(string(upstream), "\n") {
		if strings.HasPrefix(line, "go ") || strings.HasPrefix(line, "godebug ") {
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("\nrequire k8s.io/kubernetes " + version + "\n\n")
	staging := "v0" + strings.TrimPrefix(version, "v1")
	m := stagingReplace.FindAllSubmatch(upstream, -1)
	if len(m) == 0 {
		return nil, errors.New("k8s.io/kubernetes go.mod: no replace of a staging module found")
	}
	for _, r := range m {
		fmt.Fprintf(&b, "replace %s => %s %s\n", r[1], r[1], staging)
	}
	return []byte(b.String()), nil
}
