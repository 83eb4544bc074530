package otelcol

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eaddr/eaddr/internal/testing/buildcache"
	"github.com/eaddr/eaddr/internal/testing/child"
	"github.com/eaddr/eaddr/internal/testing/testenv"
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

	proc *child.Process
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
		Config: append(config, override)}
	var args []string
	for _, f := range c.Config {
		args = append(args, "--config", "file:"+f)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), IncludeEnv+"="+include, "EADDR_OTLP_FILE="+c.Output)
	var err error
	if c.proc, err = child.Start("otelcol", c.Log, cmd); err != nil { // killed with the test binary, and not before
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("%v\n%s", err, buildcache.Tail(c.Log, 30))
		}
	})
	t.Logf("otelcol %s: pid %d, configs %q, include %s, output %s", Version, cmd.Process.Pid, c.Config, include, c.Output)
	return c
}

// Exited reports whether the collector has exited.
func (c *Collector) Exited() bool { return c.proc.Exited() }

// Stop stops the collector by its pid: SIGTERM (it flushes its exporters),
// then SIGKILL after 10 s. It is an error when it had already exited with
// a failure, or had to be killed.
func (c *Collector) Stop() error {
	if c.proc.Exited() {
		if err := c.proc.Err(); err != nil {
			return fmt.Errorf("otelcol (pid %d) exited on its own: %v", c.proc.Cmd.Process.Pid, err)
		}
		return nil
	}
	killed, err := c.proc.Stop(10 * time.Second)
	if err != nil {
		return fmt.Errorf("otelcol (pid %d): %w", c.proc.Cmd.Process.Pid, err)
	}
	if killed {
		return errors.New("otelcol did not stop within 10s of SIGTERM: killed")
	}
	return nil
}
