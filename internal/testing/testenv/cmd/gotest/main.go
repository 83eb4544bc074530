// Command gotest runs `go test -json` with the given arguments and prints what
// a plain `go test` prints (each package's result, the output of failing
// tests), then the ten slowest tests with their seconds, the tests that
// skipped, each with its reason, and one summary
// line: how many passed, skipped and failed, why they skipped, and the command
// that installs what the skipped ones need. It exits with go test's status.
// `make test` runs it, so that a fresh machine's skips are not silent. GO
// names the go command (default go).
//
//	go run ./internal/testing/testenv/cmd/gotest -p 1 -count=1 ./...
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

func main() {
	goBin := os.Getenv("GO") // the Makefile's $(GO)
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	s := newSummary(os.Stdout)
	readErr := s.read(out)
	err = cmd.Wait()
	s.finish(os.Getuid() == 0)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	case readErr != nil:
		fmt.Fprintln(os.Stderr, "gotest: reading go test -json:", readErr)
		os.Exit(2)
	case s.failed > 0:
		os.Exit(1)
	}
}
