package otelcol

import (
	"errors"
	"fmt"
	"github.com/eaddr/eaddr/internal/testing/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/pdeath"
	"github.com/eaddr/eaddr/internal/testing/buildcache"
)

// ConfigPath is deploy/otelcol/eaddr.yaml in this repository: the config
// users copy, which Run gives the collector first.
func ConfigPath() string {
	return filepath.Join(testenv.Root(), "deploy", "otelcol", "eaddr.yaml")
}

// IncludeEnv is the environment variable ConfigPath's include glob comes
// from (default /var/log/pods/*_eaddr-*_*/eaddr/*.log).
const IncludeEnv = "EADDR_LOG_INCLUDE"

// fileExporter is the second --config of Run: the logs/eaddr pipeline goes
// to the file exporter (OTLP JSON, one export a line) at $EADDR_OTLP_FILE,
// and the collector's own metrics are off, so that it listens on no port.
const fileExporter = `exporters:
  file/eaddr:
    path: ${env:EADDR_OTLP_FILE}
    format: json
    flush_interval: 100ms
service:
  pipelines:
    logs/eaddr:
      exporters: [file/eaddr]
  telemetry:
    metrics:
      level: none
`

// Collector is a collector process started by Run.
type Collector struct {
	Output string // the file exporter's OTLP JSON
	Log    string // the collector's stdout and stderr
	Config []string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// Run starts the collector (Binary) with config (ConfigPath() unless
// given) and the file exporter of fileExporter, reading the CRI logs that
// match include. A cleanup stops it (SIGTERM, then SIGKILL after 10 s) even
// when the test fails; the collector also gets SIGKILL if the test process
// dies.
func Run(t testing.TB, include string, config ...string) *Collector {
	t.Helper()
	bin := Binary(t)
	if len(config) == 0 {
		config = []string{ConfigPath()}
	}
	dir := t.TempDir()
	override := filepath.Join(dir, "file-exporter.yaml")
	if err := os.WriteFile(override, []byte(fileExporter), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Collector{Output: filepath.Join(dir, "otlp.jsonl"), Log: filepath.Join(dir, "otelcol.log"),
		Config: append(config, override), done: make(chan struct{})}
	logFile, err := os.Create(c.Log)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, f := range c.Config {
		args = append(args, "--config", "file:"+f)
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append(os.Environ(), IncludeEnv+"="+include, "EADDR_OTLP_FILE="+c.Output)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := pdeath.Start(c.cmd, nil); err != nil { // killed with the test binary, and not before
		logFile.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		c.cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("%v\n%s", err, buildcache.Tail(c.Log, 30))
		}
	})
	t.Logf("otelcol %s: pid %d, configs %q, include %s, output %s", Version, c.cmd.Process.Pid, c.Config, include, c.Output)
	return c
}

// Exited reports whether the collector has exited.
func (c *Collector) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop stops the collector by its pid: SIGTERM (it flushes its exporters),
// then SIGKILL after 10 s. It is an error when it had already exited with
// a failure, or had to be killed.
func (c *Collector) Stop() error {
	if c.Exited() {
		if st := c.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Errorf("otelcol (pid %d) exited on its own: %v", c.cmd.Process.Pid, st)
		}
		return nil
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	c.cmd.Process.Kill()
	<-c.done
	return errors.New("otelcol did not stop within 10s of SIGTERM: killed")
}
