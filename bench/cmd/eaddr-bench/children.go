package main

import (
	"bytes"
	"os/exec"

	"github.com/eaddr/eaddr/internal/pdeath"
)

// combinedOutput is cmd.CombinedOutput with cmd started by pdeath.Start:
// killed if eaddr-bench dies, and not before (the bench's workers lock and
// retire threads, and a child forked from a retired thread gets its
// parent-death signal then).
func combinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := pdeath.Start(cmd, nil); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}
