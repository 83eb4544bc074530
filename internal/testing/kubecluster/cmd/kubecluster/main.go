// Command kubecluster starts internal/testing/kubecluster's single-node cluster for
// people (`make cluster-up`) and stops it (`make cluster-down`, or Ctrl-C):
//
//	kubecluster up   [-state FILE] [-pod-logs-dir DIR]  start, print how to use it, run until SIGINT/SIGTERM, restore the host
//	kubecluster down [-state FILE]  stop the cluster FILE records and restore the host, from any shell
//
// Everything the cluster changes on the host is recorded in FILE
// (/run/eaddr-kubecluster.json) before it is changed, so `down` can undo it
// even when `up` was killed. Needs root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/kubecluster"
	"github.com/eaddr/eaddr/internal/testing/kubetest"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("kubecluster: ")
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: kubecluster up|down [-state FILE]")
		os.Exit(2)
	}
	fl := flag.NewFlagSet("kubecluster "+os.Args[1], flag.ExitOnError)
	state := fl.String("state", kubecluster.DefaultStatePath, "the state file: what the cluster changed on the host")
	podLogs := fl.String("pod-logs-dir", "", "up: the kubelet's podLogsDir (e.g. /var/log/pods); the cluster's own directory when empty")
	fl.Parse(os.Args[2:])
	var err error
	if os.Args[1] == "up" {
		err = up(*state, *podLogs)
	} else {
		err = down(*state)
	}
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// down tears down the cluster the state file records.
func down(path string) error {
	s, err := kubecluster.ReadState(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Printf("no cluster: %s does not exist; looking for clusters of killed tests (%s)", path, kubecluster.StateGlob)
		return kubecluster.TeardownStale(log.Printf)
	}
	if err != nil {
		return err
	}
	if err := kubecluster.Teardown(s, log.Printf); err != nil {
		return fmt.Errorf("restoring the host: %w (state kept in %s)", err, path)
	}
	os.Remove(path)
	log.Printf("cluster stopped, host restored")
	return nil
}

// up starts a cluster, prints how to use it and runs until a signal.
func up(path, podLogs string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists: a cluster runs already, or was killed (make cluster-down)", path)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	t := &tb{}
	defer t.cleanup()
	c, err := t.run(func() *kubecluster.Cluster {
		return kubecluster.StartWith(t, kubecluster.Options{StatePath: path, PodLogsDir: podLogs})
	})
	if err != nil {
		return err
	}
	root, _ := filepath.Abs(".")
	fmt.Printf(`
The cluster is up: node %s (%s) Ready in %s.

  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl get nodes -o wide

eaddr on it, as README.md installs it (TAG: the VERSION make image printed):

  make image
  ctr --address %s -n k8s.io images import --snapshotter native %s/bin/eaddr-image.tar
  kubectl apply -k %s/deploy/kube-events
  kubectl -n eaddr set image daemonset/eaddr eaddr=localhost/eaddr:TAG
  kubectl -n eaddr logs -l app=eaddr -f

Logs: %s/logs. Ctrl-C here, or `+"`make cluster-down`"+` in another shell, stops it and restores the host.
`, c.NodeName, c.NodeIP, c.ReadyAfter.Round(100*time.Millisecond), c.Kubeconfig, kubetest.BinaryPath("kubectl"),
		c.CRISocket, root, root, c.Dir)
	sig := <-signals
	log.Printf("%s: stopping the cluster and restoring the host", sig)
	return nil
}

// tb is the testing.TB that kubecluster.Start and kubetest need, for a
// command: logs go to stderr, Fatal and Skip end run with an error, Cleanup
// functions run when the command ends. The embedded nil TB makes any other
// method panic: kubecluster does not call them.
type tb struct {
	testing.TB
	cleanups []func()
	failed   bool
}

// fatal is the panic value of Fatal and Skip, recovered by run.
type fatal struct{ msg string }

func (t *tb) run(start func() *kubecluster.Cluster) (c *kubecluster.Cluster, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	return start(), nil
}

func (t *tb) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

func (t *tb) Helper()                         {}
func (t *tb) Name() string                    { return "cluster-up" }
func (t *tb) Failed() bool                    { return t.failed }
func (t *tb) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }
func (t *tb) Log(args ...any)                 { log.Print(args...) }
func (t *tb) Logf(format string, args ...any) { log.Printf(format, args...) }
func (t *tb) Error(args ...any)               { t.failed = true; log.Print(args...) }
func (t *tb) Errorf(format string, args ...any) {
	t.failed = true
	log.Printf(format, args...)
}
func (t *tb) Fatal(args ...any) { t.failed = true; panic(fatal{fmt.Sprint(args...)}) }
func (t *tb) Fatalf(format string, args ...any) {
	t.failed = true
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (t *tb) Skip(args ...any)                 { panic(fatal{fmt.Sprint(args...)}) }
func (t *tb) Skipf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }
func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "eaddr-kubecluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
