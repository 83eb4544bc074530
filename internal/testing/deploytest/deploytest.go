// Package deploytest is what the tiers that test deploy/'s manifests share
// (e2e/apiserver: decoded, kustomized, rendered by helm, applied to a real
// kube-apiserver; e2e/cluster: installed on the single-node cluster).
package deploytest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eaddr/eaddr/internal/testing/testenv"
)

// ChartDir is eaddr's Helm chart, relative to deploy/: the objects of
// deploy/base, with kubeEvents.enabled=true those of deploy/kube-events, and
// with nodePortCollisions.enabled=true too those of deploy/nodeport-collisions;
// metrics.networkPolicy.enabled=true adds deploy/metrics-policy's.
const ChartDir = "helm/eaddr"

// Release is the release name the tests render and install the chart as:
// the one the docs use, so that the objects are named eaddr, as in deploy/.
const Release = "eaddr"

// Main runs a tier's tests in deploy/, the directory of the manifests, as
// if they were deploy/'s own: the paths they name (base/, helm/eaddr,
// ../README.md, ../docs/...) are the ones a person types there.
func Main(m *testing.M) {
	Chdir()
	os.Exit(m.Run())
}

// Chdir makes deploy/ the working directory, as Main does, for a TestMain
// that does more.
func Chdir() {
	if err := os.Chdir(filepath.Join(testenv.Root(), "deploy")); err != nil {
		panic(err)
	}
}
